package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// cloudAPI is a fake WhatsApp Cloud API that answers every message after
// delay (until answerAtOnce) and counts the messages each recipient
// received. It cannot de-duplicate, like the real one: a message sent twice
// arrives twice.
type cloudAPI struct {
	mu       sync.Mutex
	received map[string]int // by recipient number
	arrived  chan string
	server   *httptest.Server
	fast     atomic.Bool // answer without the delay
}

// answerAtOnce drops the delay for the requests that arrive from now on.
func (api *cloudAPI) answerAtOnce() { api.fast.Store(true) }

func newCloudAPI(t *testing.T, delay time.Duration) *cloudAPI {
	api := &cloudAPI{received: map[string]int{}, arrived: make(chan string, 1000)}
	api.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // the run's read of the number's health, not a send
			w.WriteHeader(http.StatusNotFound)
			return
		}
		var body struct {
			To string `json:"to"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		api.mu.Lock()
		api.received[body.To]++
		api.mu.Unlock()
		api.arrived <- body.To
		if !api.fast.Load() {
			select {
			case <-time.After(delay): // the provider is slow
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"messages":[{"id":"wamid.` + body.To + `"}]}`))
	}))
	t.Cleanup(func() {
		api.server.CloseClientConnections()
		api.server.Close()
	})
	return api
}

func (api *cloudAPI) counts() map[string]int {
	api.mu.Lock()
	defer api.mu.Unlock()
	out := make(map[string]int, len(api.received))
	for k, v := range api.received {
		out[k] = v
	}
	return out
}

// cloudEnv is the environment of a queue-process on the whatsapp-cloud
// transport against api.
func cloudEnv(t *testing.T, dbURL string, api *cloudAPI) []string {
	t.Helper()
	return cloudEnvAt(t, dbURL, api.server.URL)
}

// cloudEnvAt is cloudEnv for a fake Cloud API at baseURL.
func cloudEnvAt(t *testing.T, dbURL, baseURL string) []string {
	t.Helper()
	templates := filepath.Join(t.TempDir(), "templates.json")
	err := os.WriteFile(templates, []byte(`{"engagement.weekly_review.celebration":
		{"name":"weekly_review_v1","language":{"pt-BR":"pt_BR"},"params":["count"]}}`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return cmdtest.Env("DATABASE_URL="+dbURL, "ENGAGEMENT_TRANSPORT=whatsapp-cloud",
		"WHATSAPP_PHONE_NUMBER_ID=1234567890", "WHATSAPP_ACCESS_TOKEN=tok",
		"WHATSAPP_TEMPLATES="+templates, "WHATSAPP_BASE_URL="+baseURL)
}

// queueRecipients queues one weekly review to each of n numbers and returns
// the numbers.
func queueRecipients(t *testing.T, pool *pgxpool.Pool, n int) []string {
	t.Helper()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	numbers := make([]string, n)
	for i := range numbers {
		numbers[i] = fmt.Sprintf("55119%08d", i+1)
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey,
			Params: `{"count":"2"}`, JID: numbers[i] + "@s.whatsapp.net", ScheduledFor: time.Now().Add(-time.Minute),
			Key: user + ":test:" + numbers[i]})
	}
	return numbers
}

// checkExactlyOnce fails the test when any recipient got a message twice,
// or a message marked sent never arrived.
func checkExactlyOnce(t *testing.T, pool *pgxpool.Pool, api *cloudAPI) {
	t.Helper()
	got := api.counts()
	for number, n := range got {
		if n > 1 {
			t.Errorf("recipient %s got the same message %d times", number, n)
		}
	}
	for _, m := range fixture.AllMessages(t, pool) {
		if m.Status != "sent" {
			continue
		}
		number, _, _ := strings.Cut(m.DestinationJID, "@")
		if got[number] == 0 {
			t.Errorf("the message to %s is marked sent but never arrived", number)
		}
	}
}

// Issue 14, item 1: "a fake Cloud API that answers after 2 s,
// --claim-timeout 6s, one process, and a second started 8 s later: 6 of 12
// recipients got the same message twice". The same race at a smaller
// scale: the provider answers after 300 ms, claims live 1 s, one worker
// works through its claim of 10 for 3 s, and a second process starts after
// 1.2 s. The first process must keep its claims alive while it works, and
// the second must find nothing of them to take.
func TestSlowCloudAPIAndShortClaimsSendNothingTwice(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	api := newCloudAPI(t, 300*time.Millisecond)
	numbers := queueRecipients(t, pool, 12)
	env := cloudEnv(t, url, api)
	args := []string{"--send-interval", "10ms", "--claim-timeout", "1s", "--workers", "1", "--max-duration", "30s"}

	first, _, firstErr := cmdtest.Command(bin, env, args...)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	<-api.arrived
	time.Sleep(1200 * time.Millisecond) // the fault itself: the first claims outlive their timeout
	second := cmdtest.Run(t, bin, env, args...)
	if err := first.Wait(); err != nil {
		t.Fatalf("first process: %v: %s", err, firstErr)
	}
	if second.Code != 0 {
		t.Fatalf("second process: exit %d: %s", second.Code, second.Stderr)
	}
	checkExactlyOnce(t, pool, api)
	if got := statusCounts(t, pool); got["sent"] != len(numbers) {
		t.Errorf("statuses %v, want all %d sent", got, len(numbers))
	}
}

// A process killed with SIGKILL while the slow provider holds its
// requests: the next process must neither send those messages again (the
// Cloud API cannot de-duplicate: they fail with "outcome unknown") nor lose
// the ones never started.
func TestKilledMidSendOnTheCloudAPISendsNothingTwice(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	api := newCloudAPI(t, 2*time.Second)
	numbers := queueRecipients(t, pool, 12)
	env := cloudEnv(t, url, api)

	first, _, _ := cmdtest.Command(bin, env, "--send-interval", "0", "--workers", "4", "--claim-timeout", "1h")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	<-api.arrived
	time.Sleep(100 * time.Millisecond) // let the other workers' first requests arrive too
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	inFlight := 0 // the provider answers after 2 s: everything it received was in flight at the kill
	for _, n := range api.counts() {
		inFlight += n
	}
	// The next process's sends need not wait: the kill is what was tested.
	api.answerAtOnce()

	// Time passes (the database's clock): the dead process's claims expire.
	fixture.ExpireClaims(t, pool)
	res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0", "--workers", "4")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	checkExactlyOnce(t, pool, api)
	got := statusCounts(t, pool)
	if got["sent"]+got["failed"] != len(numbers) {
		t.Errorf("statuses %v, want every message settled", got)
	}
	unknown, doubtedNotFailed := 0, 0
	for _, m := range fixture.AllMessages(t, pool) {
		switch {
		case m.Status == "failed" && fixture.Deref(m.InDoubt) && strings.Contains(fixture.Deref(m.ErrorMessage), "outcome unknown"):
			unknown++
		case fixture.Deref(m.InDoubt) && m.Status != "failed":
			doubtedNotFailed++
		}
	}
	if got["failed"] != inFlight || unknown != inFlight {
		t.Errorf("statuses %v, %d failed in doubt (in_doubt, outcome unknown); want exactly the %d messages in flight at the kill failed so",
			got, unknown, inFlight)
	}
	if n := doubtedNotFailed; n != 0 {
		t.Errorf("%d messages in doubt that did not fail", n)
	}
}

// Issue 14, item 3: with --dedupe-store the key was recorded before the
// send, so a process killed mid-send left a message the next run marked
// sent ("not sent again") although the bot never received it. The key must
// be recorded only once the message was delivered.
func TestDedupeStoreNeverMarksAnUndeliveredMessageSent(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	b := newBot(t, true) // the first request hangs: the bot never answers it
	queueMessages(t, pool, 1)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL,
		"ENGAGEMENT_DEDUPE_STORE=postgres")

	cmd, _, _ := cmdtest.Command(bin, env, "--send-interval", "0", "--claim-timeout", "1h")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-b.arrived
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	close(b.hold)

	fixture.ExpireClaims(t, pool)
	res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	if got := statusCounts(t, pool); got["sent"] != 1 {
		t.Fatalf("statuses %v, want the message sent; stderr: %s", got, res.Stderr)
	}
	_, keys := b.received()
	if len(keys) != 2 || keys[0] != keys[1] {
		t.Errorf("the bot received %d requests (keys %v), want the killed send finished by a second request under the same key", len(keys), keys)
	}
	if strings.Contains(string(res.Stderr), "not sent again") {
		t.Errorf("the run says the dedupe store stopped the send: %s", res.Stderr)
	}
}
