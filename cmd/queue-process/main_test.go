package main_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/arrivals"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

func binary(t *testing.T) string { return cmdtest.Build(t, "./cmd/queue-process") }

// bot is a fake bot webhook. Requests block while hold is set.
type bot struct {
	mu       sync.Mutex
	times    []time.Time
	keys     []string
	arrived  chan struct{}
	hold     chan struct{}
	server   *httptest.Server
	holdNext bool
}

func newBot(t *testing.T, holdNext bool) *bot {
	b := &bot{arrived: make(chan struct{}, 1000), hold: make(chan struct{}), holdNext: holdNext}
	b.server = httptest.NewUnstartedServer(http.HandlerFunc(b.serve))
	b.server.Listener = arrivals.Listener(b.server.Listener)
	b.server.Config.ConnContext = arrivals.ConnContext
	b.server.Start()
	t.Cleanup(func() {
		b.server.CloseClientConnections()
		b.server.Close()
	})
	return b
}

func (b *bot) serve(w http.ResponseWriter, r *http.Request) {
	at := arrivals.At(r) // the kernel's: a busy machine runs the handler late
	if at.IsZero() {
		at = time.Now()
	}
	b.mu.Lock()
	b.times = append(b.times, at)
	b.keys = append(b.keys, r.Header.Get("Idempotency-Key"))
	hold := b.holdNext
	b.holdNext = false
	b.mu.Unlock()
	b.arrived <- struct{}{}
	if hold {
		select {
		case <-b.hold:
		case <-r.Context().Done():
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

func (b *bot) received() ([]time.Time, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.times...), append([]string(nil), b.keys...)
}

func queueMessages(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	fixture.DueReviews(t, pool, n, "test-")
}

func statusCounts(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	return fixture.SendStatuses(t, pool)
}

func TestConfigurationErrors(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no database", nil, []string{"--transport", "log"}, "DATABASE_URL"},
		{"no transport", []string{"DATABASE_URL=" + url}, nil, "transport"},
		{"unknown transport", []string{"DATABASE_URL=" + url}, []string{"--transport", "carrier-pigeon"}, "carrier-pigeon"},
		{"webhook without URL", []string{"DATABASE_URL=" + url}, []string{"--transport", "webhook"}, "--webhook-url"},
		{"bad interval", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--send-interval", "soon"}, "send-interval"},
		{"unknown dedupe store", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--dedupe-store", "mongo://x"}, "unknown store"},
		{"short claim timeout", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--claim-timeout", "10ms"}, "--claim-timeout"},
		{"bad quiet hours", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--quiet-hours", "25:00-08:00"}, "--quiet-hours"},
		{"quiet hours of no length", []string{"DATABASE_URL=" + url, "ENGAGEMENT_QUIET_HOURS=08:00-08:00"}, []string{"--transport", "log"}, "--quiet-hours"},
		{"unknown time zone", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--timezone", "Mars/Olympus_Mons"}, "--timezone"},
		{"negative daily limit", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--daily-limit", "-1"}, "--daily-limit"},
		{"daily limit not a number", []string{"DATABASE_URL=" + url, "ENGAGEMENT_DAILY_LIMIT=lots"}, []string{"--transport", "log"}, "ENGAGEMENT_DAILY_LIMIT"},
		{"ramp without a limit", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--daily-limit-ramp", "50,2"}, "--daily-limit-ramp needs --daily-limit"},
		{"bad ramp", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--daily-limit", "300", "--daily-limit-ramp", "50"}, "START,FACTOR"},
		{"ramp shrinking", []string{"DATABASE_URL=" + url, "ENGAGEMENT_DAILY_LIMIT_RAMP=50,0.5"}, []string{"--transport", "log", "--daily-limit", "300"}, "factor"},
		{"warm-up and a ramp", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--warm-up", "--daily-limit-ramp", "50,2"}, "--warm-up"},
		{"warm-up under Meta's limit", []string{"DATABASE_URL=" + url, "ENGAGEMENT_WARM_UP=true"}, []string{"--transport", "log", "--daily-limit", "auto"}, "--warm-up"},
		{"warm-up on the Cloud API", []string{"DATABASE_URL=" + url, "WHATSAPP_PHONE_NUMBER_ID=1", "WHATSAPP_ACCESS_TOKEN=tok"}, []string{"--transport", "whatsapp-cloud", "--warm-up"}, "--warm-up is for the webhook"},
		{"negative reach-out window", []string{"DATABASE_URL=" + url, "ENGAGEMENT_REACHOUT_WINDOW=-1h"}, []string{"--transport", "log"}, "--reachout-window"},
		{"unknown kind in the priority", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--kind-priority", "goodbye,farewell"}, "--kind-priority"},
		{"kind listed twice", []string{"DATABASE_URL=" + url, "ENGAGEMENT_KIND_PRIORITY=goodbye,goodbye"}, []string{"--transport", "log"}, "--kind-priority"},
		{"no wait before a kind ages", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--kind-priority-max-wait", "0s"}, "--kind-priority-max-wait"},
		{"negative per-user cap", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--per-user-cap", "-1"}, "--per-user-cap"},
		{"per-user cap window of nothing", []string{"DATABASE_URL=" + url, "ENGAGEMENT_PER_USER_CAP_WINDOW=0s"}, []string{"--transport", "log", "--per-user-cap", "1"}, "--per-user-cap-window"},
		{"jitter above the interval", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--send-interval", "1s", "--send-jitter", "2s"}, "--send-jitter"},
		{"negative jitter", []string{"DATABASE_URL=" + url, "ENGAGEMENT_SEND_JITTER=-1s"}, []string{"--transport", "log"}, "--send-jitter"},
		{"spread without a budget", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--spread-budget"}, "--spread-budget needs --daily-limit"},
		{"daily limit auto on the webhook", []string{"DATABASE_URL=" + url}, []string{"--transport", "webhook", "--webhook-url", "http://127.0.0.1:1/x", "--daily-limit", "auto"}, "--daily-limit auto"},
		{"as-of in the past", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--as-of", "2020-01-01T00:00:00Z"}, "can only simulate a later instant"},
		{"as-of in the future without the flag", []string{"DATABASE_URL=" + url}, []string{"--transport", "log", "--as-of", "2099-01-01T00:00:00Z"}, "--allow-future-as-of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := cmdtest.Exec(t, queuecmd.NewCommand, cmdtest.Env(tt.env...), tt.args...)
			if res.Code != 2 || !strings.Contains(res.Stderr, tt.want) || len(cmdtest.Lines(res.Stderr)) != 1 {
				t.Errorf("exit %d stderr %q; want exit 2 and one line mentioning %q", res.Code, res.Stderr, tt.want)
			}
		})
	}
}

func TestDefaultPacingAndJSONSummary(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	b := newBot(t, false)
	const n = 4
	queueMessages(t, pool, n)

	res := cmdtest.Exec(t, queuecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL, "ENGAGEMENT_WEBHOOK_SECRET=topsecret"), "--output", "json")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	var sum struct {
		Job                              string
		Processed, Sent, Retried, Failed int
		DurationMS                       *int `json:"duration_ms"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v: %s", err, res.Stdout)
	}
	if sum.Job != "queue-process" || sum.Processed != n || sum.Sent != n || sum.DurationMS == nil {
		t.Errorf("summary %+v, want %d processed and sent", sum, n)
	}
	times, _ := b.received()
	if len(times) != n {
		t.Fatalf("the receiver got %d requests, want %d", len(times), n)
	}
	fixture.CheckPace(t, times, 500*time.Millisecond) // the default pace
	for _, leak := range []string{"topsecret", "5511999990000", "Transações"} {
		if strings.Contains(res.Stderr, leak) {
			t.Errorf("the log contains %q", leak)
		}
	}
}

func TestKilledMidSendIsFinishedUnderTheSameKey(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	b := newBot(t, true) // the first request hangs
	queueMessages(t, pool, 1)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL)

	cmd, _, _ := cmdtest.Command(bin, env, "--send-interval", "0", "--claim-timeout", "1h")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-b.arrived
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	close(b.hold)

	if got := statusCounts(t, pool); got["processing"] != 1 {
		t.Fatalf("after SIGKILL: %v, want the message still claimed", got)
	}
	// A run now finds the claim alive and leaves it alone.
	if res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0"); res.Code != 0 || statusCounts(t, pool)["processing"] != 1 {
		t.Fatalf("a run during the claim: exit %d, %v; want the claim respected", res.Code, statusCounts(t, pool))
	}
	// Time passes (the clock is the database's): the claim expires.
	fixture.ExpireClaims(t, pool)
	res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	if got := statusCounts(t, pool); got["sent"] != 1 || len(got) != 1 {
		t.Errorf("after the next run: %v, want the message sent and nothing claimed", got)
	}
	_, keys := b.received()
	if len(keys) != 2 || keys[0] != keys[1] {
		t.Errorf("requests carried keys %v, want the resend under the same Idempotency-Key", keys)
	}
}

func TestSIGTERMDuringADrain(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	b := newBot(t, false)
	queueMessages(t, pool, 200)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL)

	cmd, _, stderr := cmdtest.Command(bin, env, "--send-interval", "100ms")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-b.arrived
	}
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	// A hang, not a pace: the drain alone would take 20 s.
	if took := time.Since(start); took > time.Minute {
		t.Errorf("exit took %s after SIGTERM, want prompt", took)
	}
	if err != nil {
		t.Errorf("exit after SIGTERM: %v (%s)", err, stderr)
	}
	got := statusCounts(t, pool)
	times, _ := b.received()
	if got["processing"] != 0 {
		t.Errorf("%d messages left claimed after SIGTERM", got["processing"])
	}
	if got["sent"] != len(times) || got["sent"]+got["pending"] != 200 || got["pending"] == 0 {
		t.Errorf("statuses %v with %d received, want every received message sent and the rest pending (SIGTERM stops the drain)", got, len(times))
	}
}

// TestTwoProcessesKeepThePaceTogether runs two processes: the pace must hold
// across processes, not only across one process's workers.
func TestTwoProcessesKeepThePaceTogether(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	b := newBot(t, false)
	queueMessages(t, pool, 4)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL)

	var wg sync.WaitGroup
	results := make([]cmdtest.Result, 2)
	for i := range results {
		wg.Go(func() { results[i] = cmdtest.Run(t, bin, env, "--output", "json") }) // default pace: 500 ms
	}
	wg.Wait()
	sent := 0
	for i, res := range results {
		if res.Code != 0 {
			t.Fatalf("process %d: exit %d: %s", i, res.Code, res.Stderr)
		}
		var sum struct{ Sent int }
		if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
			t.Fatal(err)
		}
		sent += sum.Sent
	}
	times, keys := b.received()
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Errorf("message %s sent twice", k)
		}
		seen[k] = true
	}
	if sent != 4 || len(keys) != 4 {
		t.Errorf("the processes sent %d and the bot got %d, want each of the 4 messages once", sent, len(keys))
	}
	fixture.CheckPace(t, times, 500*time.Millisecond) // two processes together keep the default pace
}

// --max-duration stops claiming: some sent, the rest pending, none left
// claimed. Two seconds apart over five, so that the first send comes
// within the run however slowly it starts (200 ms over 700 ms sent
// nothing under the race detector beside two CPU burners).
func TestMaxDurationStopsClaiming(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	b := newBot(t, false)
	queueMessages(t, pool, 20)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL)

	res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "2s", "--max-duration", "5s")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	got := statusCounts(t, pool)
	_, keys := b.received()
	if got["processing"] != 0 || got["sent"] != len(keys) || got["sent"] == 0 || got["sent"] >= 20 || got["sent"]+got["pending"] != 20 {
		t.Errorf("after --max-duration: %v with %d received; want some sent, the rest pending, none claimed", got, len(keys))
	}
}
