package poolertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Delivery through PgBouncer in transaction mode, on both recording paths
// of the engine: engagementctl enqueue with params (JSON sent as text),
// then a paced webhook (batched recording, lazily committed settles, the
// pace's slot reservations), the Cloud API (the fenced start of every
// send) and a webhook paced over the floor's tolerance (the pace's floor
// gate, floor.go: its holder is the server's process, not the one
// PgBouncer names to the client), two processes at once on each, every
// message delivered once.
func TestDeliveryThroughPgBouncer(t *testing.T) {
	t.Parallel()
	direct, pooled := pgtest.NewPooledDatabase(t)
	pool, err := pgxpool.New(context.Background(), direct) // not the binaries' pool: the test's fixture and checks
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var (
		mu   sync.Mutex
		got  = map[string]int{}
		hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got["webhook"+r.URL.Path+" "+r.Header.Get("Idempotency-Key")]++
			mu.Unlock()
		}))
		api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet { // the run's read of the number's health, not a send
				w.WriteHeader(http.StatusNotFound)
				return
			}
			var body struct{ To string }
			_ = json.NewDecoder(r.Body).Decode(&body)
			mu.Lock()
			got["cloud "+body.To]++
			mu.Unlock()
			_, _ = w.Write([]byte(`{"messages":[{"id":"wamid.1"}]}`))
		}))
	)
	t.Cleanup(hook.Close)
	t.Cleanup(api.Close)

	const n = 12
	for i := range n {
		user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
		runOK(t, "engagementctl enqueue", engagementctl, pooled, "enqueue", "--user-id", user, "--type", "weekly_review",
			"--key", "engagement.weekly_review.celebration", "--params", `{"count":"3"}`,
			"--jid", fmt.Sprintf("551190000%04d@s.whatsapp.net", i), "--idempotency-key", user+":pooled")
	}
	templates := filepath.Join(t.TempDir(), "templates.json")
	if err := os.WriteFile(templates, []byte(`{"engagement.weekly_review.celebration":
		{"name":"weekly_review_v1","language":{"pt-BR":"pt_BR"},"params":["count"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	runs := [][]string{
		{"--transport", "webhook", "--webhook-url", hook.URL, "--send-interval", "5ms"},
		{"--transport", "whatsapp-cloud", "--whatsapp-base-url", api.URL, "--whatsapp-phone-number-id", "1",
			"--whatsapp-token", "tok", "--whatsapp-templates", templates, "--send-interval", "5ms"},
		{"--transport", "webhook", "--webhook-url", hook.URL + "/floor", "--send-interval", "25ms"},
	}
	bin := queueBin(t) // two processes at once: built, not in process
	for _, args := range runs {
		fixture.PoolerUnsend(t, pool)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				res := cmdtest.Run(t, bin, cmdtest.Env("DATABASE_URL="+pooled), append(args, "--output", "json")...)
				if res.Code != 0 {
					t.Errorf("queue-process %s through PgBouncer: exit %d: %s", args[1]+" at "+args[len(args)-1], res.Code, res.Stderr)
				}
			})
		}
		wg.Wait()
		if sent := fixture.CountMessages(t, pool, fixture.Messages{Status: "sent"}); sent != n {
			t.Errorf("%s through PgBouncer: %d of %d messages sent", args[1]+" at "+args[len(args)-1], sent, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(runs)*n {
		t.Errorf("the receivers got %d distinct messages, want %d: %v", len(got), len(runs)*n, got)
	}
	for k, c := range got {
		if c != 1 {
			t.Errorf("%s arrived %d times", k, c)
		}
	}
}
