package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// accountBot is the bot's webhook, refusing the whole account (status and
// body) until accept; it counts the requests and the keys it accepted.
type accountBot struct {
	server *httptest.Server

	mu       sync.Mutex
	status   int    // 0: accept
	body     string // the refusal's body
	requests int
	accepted map[string]int
}

func newAccountBot(t *testing.T, status int, body string) *accountBot {
	b := &accountBot{status: status, body: body, accepted: map[string]int{}}
	b.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.requests++
		if b.status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(b.status)
			_, _ = io.WriteString(w, b.body)
			return
		}
		b.accepted[r.Header.Get("Idempotency-Key")]++
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(b.server.Close)
	return b
}

func (b *accountBot) accept() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status = 0
}

// counts returns the requests so far, the keys accepted and how many of
// those were accepted more than once.
func (b *accountBot) counts() (requests, keys, repeats int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.accepted {
		keys++
		repeats += n - 1
	}
	return b.requests, keys, repeats
}

// pauseRun runs queue-process on the webhook at asOf, unpaced.
func pauseRun(t *testing.T, url string, b *accountBot, asOf time.Time) delivery.ProcessSummary {
	t.Helper()
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL)
	return queueSummary(t, cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0", "--output", "json",
		"--as-of", asOf.Format(time.RFC3339), "--allow-future-as-of"))
}

// checkWaiting checks that all n messages are pending, none with a retry
// spent (none failed).
func checkWaiting(t *testing.T, pool *pgxpool.Pool, when string, n int) {
	t.Helper()
	got := statusCounts(t, pool)
	spent := fixture.SendFiguresOf(t, pool, time.Time{}).Retried
	if got["pending"] != n || spent != 0 {
		t.Errorf("%s: statuses %v, %d with a retry spent; want all %d pending, none spent", when, got, spent, n)
	}
}

// checkPaused checks a run's summary says it stopped for the pause, of
// kind, ending at until (nil: no end).
func checkPaused(t *testing.T, when string, sum delivery.ProcessSummary, kind string, until *time.Time) {
	t.Helper()
	p := sum.Pause
	if sum.Stopped != "account_paused" || p == nil || p.Kind != kind || sum.Sent != 0 || sum.Failed != 0 || sum.Retried != 0 {
		t.Fatalf("%s: summary %+v, pause %+v; want stopped account_paused (%s), nothing sent, failed or retried", when, sum, p, kind)
	}
	switch {
	case until == nil && p.Until != nil:
		t.Errorf("%s: the pause ends at %s; want no end (until cleared)", when, p.Until)
	case until != nil && (p.Until == nil || p.Until.Sub(*until).Abs() > time.Minute):
		t.Errorf("%s: the pause ends at %v; want about %s", when, p.Until, until)
	}
}

// Issue 58: "when the bot's account is rate-limited, logged out or
// banned, queue-process keeps trying message after message (20 requests
// in two runs for 5 messages), and marks them failed." An account refusal
// stops the run at its first answer (1 request), exit 0, the summary says
// why and until when; a run within the pause sends nothing (0 requests);
// the messages wait, pending, no retry spent; after the pause (the clock
// past its end, --as-of) every message goes, once.
func TestAnAccountRefusalPausesEveryRunUntilItEnds(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	const messages = 5
	queueMessages(t, pool, messages)
	bot := newAccountBot(t, http.StatusTooManyRequests, `{"account_error":"rate_overlimit","retry_after_s":3600}`)
	asOf := fixture.Now(t, pool).Add(time.Minute).Truncate(time.Second)
	until := asOf.Add(time.Hour)

	sum := pauseRun(t, url, bot, asOf)
	checkPaused(t, "the refused run", sum, "rate_overlimit", &until)
	if requests, _, _ := bot.counts(); requests != 1 || sum.Released != messages {
		t.Errorf("the refused run made %d requests and released %d; want 1 request, all %d released", requests, sum.Released, messages)
	}
	checkWaiting(t, pool, "after the refused run", messages)

	sum = pauseRun(t, url, bot, asOf.Add(30*time.Minute))
	checkPaused(t, "a run within the pause", sum, "rate_overlimit", &until)
	if requests, _, _ := bot.counts(); requests != 1 {
		t.Errorf("a run within the pause made %d requests; want none", requests-1)
	}
	checkWaiting(t, pool, "after a run within the pause", messages)

	bot.accept()
	sum = pauseRun(t, url, bot, asOf.Add(61*time.Minute))
	requests, keys, repeats := bot.counts()
	if sum.Stopped != "" || sum.Sent != messages || keys != messages || repeats != 0 || requests != 1+messages {
		t.Errorf("after the pause: summary %+v, %d requests, %d keys accepted, %d repeats; want all %d sent once", sum, requests, keys, repeats, messages)
	}
	if got := statusCounts(t, pool); got["sent"] != messages {
		t.Errorf("after the pause: statuses %v; want all %d sent", got, messages)
	}
}

// Three queue-process at once against a bot whose account is banned (it
// refuses every request). The bound the design keeps: a request starts
// only after a check of the pause, in the process (a refusal it met) and
// in the database (one another process recorded); so a worker sends at
// most the one request that was in flight when its process or the
// database learnt of the pause. With one worker each: at most 3 requests
// in all, at least 1; every run exits 0 paused; nothing failed.
func TestThreeProcessesStopAtTheirFirstAccountRefusal(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	const messages, procs = 60, 3
	queueMessages(t, pool, messages)
	bot := newAccountBot(t, http.StatusForbidden, `{"account_error":"banned"}`)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.server.URL)
	// Paced (a claim of 4 at a time, so that every process has work), one
	// worker each.
	args := []string{"--send-interval", "20ms", "--workers", "1", "--output", "json"}

	bin := binary(t)
	results := make([]cmdtest.Result, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() { results[i] = cmdtest.Run(t, bin, env, args...) })
	}
	wg.Wait()
	for i, res := range results {
		sum := queueSummary(t, res)
		if sum.Stopped != "account_paused" || sum.Pause == nil || sum.Pause.Kind != "banned" || sum.Failed != 0 {
			t.Errorf("process %d: summary %s; want stopped account_paused (banned), nothing failed", i, res.Stdout)
		}
	}
	if requests, _, _ := bot.counts(); requests < 1 || requests > procs {
		t.Errorf("%d processes made %d requests; want 1 to %d (one in flight per worker at most)", procs, requests, procs)
	}
	checkWaiting(t, pool, "after the three runs", messages)

	before, _, _ := bot.counts()
	res := cmdtest.Run(t, bin, env, args...)
	if sum := queueSummary(t, res); sum.Stopped != "account_paused" {
		t.Errorf("a later run: summary %s; want stopped account_paused", res.Stdout)
	}
	if after, _, _ := bot.counts(); after != before {
		t.Errorf("a run during the ban made %d requests; want none", after-before)
	}
}

// A 409 without an account_error keeps its meaning for one message (the
// key was claimed and never finished: that message fails for good), and
// pauses nothing: every message gets its request.
func TestA409WithoutAnAccountErrorIsStillOneMessagesFailure(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	const messages = 5
	queueMessages(t, pool, messages)
	bot := newAccountBot(t, http.StatusConflict, `{"error":"duplicate"}`)
	sum := pauseRun(t, url, bot, fixture.Now(t, pool).Add(time.Minute))
	if requests, _, _ := bot.counts(); requests != messages || sum.Stopped != "" || sum.Failed != messages {
		t.Errorf("summary %+v, %d requests; want each of the %d messages tried once and failed, no stop", sum, requests, messages)
	}
	if n := len(fixture.TransportPauses(t, pool)); n != 0 {
		t.Errorf("%d pauses recorded; want none", n)
	}
}

// Nothing changes for the Cloud API (issue 58): an answer shaped like the
// bot's account refusal is one message's throttling there (retried, then
// sent), it records no pause, and a pause recorded under its name is not
// read: it sends.
func TestTheCloudAPIKnowsNoAccountPause(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	const messages = 3
	queueNumbers(t, pool, messages)
	fixture.PauseTransport(t, pool, "whatsapp-cloud", "banned", 403, "test")
	var mu sync.Mutex
	posts := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		mu.Lock()
		posts++
		first := posts == 1
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if first {
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"account_error":"rate_overlimit","retry_after_s":3600}`)
			return
		}
		_, _ = io.WriteString(w, `{"messages":[{"id":"wamid.`+fixture.NewID()+`"}]}`)
	}))
	t.Cleanup(api.Close)

	res := cmdtest.Exec(t, queuecmd.NewCommand, cloudEnvAt(t, url, api.URL), "--send-interval", "0", "--retry-base", "10ms", "--output", "json")
	sum := queueSummary(t, res)
	if sum.Stopped != "" || sum.Pause != nil || sum.Sent != messages || sum.Retried != 1 || sum.Failed != 0 {
		t.Errorf("summary %s; want all %d sent, the 429 retried once, no pause", res.Stdout, messages)
	}
	if recorded := fixture.PauseRefusals(t, pool); !slices.Equal(recorded, []int{1}) {
		t.Errorf("the pauses table changed (refusals %v); want the one row as it was", recorded)
	}
}

// A logged-out device has no end of its own: the pause lasts, a day on
// still, until an operator re-links the device and clears it with
// engagementctl pause clear; engagementctl pause list shows it active with
// what to do; the next run sends everything.
func TestALoggedOutPauseLastsUntilAnOperatorClearsIt(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	const messages = 4
	queueMessages(t, pool, messages)
	bot := newAccountBot(t, http.StatusUnauthorized, `{"account_error":"logged_out"}`)
	asOf := fixture.Now(t, pool).Add(time.Minute).Truncate(time.Second)

	checkPaused(t, "the refused run", pauseRun(t, url, bot, asOf), "logged_out", nil)
	checkPaused(t, "a day on", pauseRun(t, url, bot, asOf.Add(24*time.Hour)), "logged_out", nil)
	text := cmdtest.Exec(t, queuecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook",
		"ENGAGEMENT_WEBHOOK_URL="+bot.server.URL), "--send-interval", "0")
	if want := "paused: the bot says WhatsApp refuses the account (logged_out); nothing is sent until it is cleared"; text.Code != 0 || !strings.Contains(text.Stdout, want) {
		t.Errorf("the text summary: exit %d, %q; want it to say %q", text.Code, text.Stdout, want)
	}
	if requests, _, _ := bot.counts(); requests != 1 {
		t.Errorf("%d requests; want the one refused", requests)
	}

	env := cmdtest.Env("DATABASE_URL=" + url)
	res := cmdtest.Exec(t, ctl.NewCommand, env, "pause", "list", "--output", "json")
	var list struct{ Pauses []delivery.Pause }
	if err := json.Unmarshal([]byte(res.Stdout), &list); res.Code != 0 || err != nil {
		t.Fatalf("pause list: exit %d, %q (%v): %s", res.Code, res.Stdout, err, res.Stderr)
	}
	if p := list.Pauses; len(p) != 1 || p[0].Transport != "webhook" || p[0].Kind != "logged_out" || !p[0].Active ||
		p[0].Until != nil || !strings.Contains(p[0].Advice, "re-link") {
		t.Errorf("pause list: %s; want the webhook's logged_out pause, active, no end, saying to re-link the device", res.Stdout)
	}
	res = cmdtest.Exec(t, ctl.NewCommand, env, "status")
	if res.Code != 0 || !strings.Contains(res.Stdout, "PAUSED: webhook, the account refused (logged_out)") {
		t.Errorf("status: exit %d, %q; want the pause said", res.Code, res.Stdout)
	}
	res = cmdtest.Exec(t, ctl.NewCommand, env, "pause", "clear", "--transport", "webhook", "--actor", "ops")
	if res.Code != 0 || !strings.Contains(res.Stdout, "cleared") {
		t.Fatalf("pause clear: exit %d, %q: %s", res.Code, res.Stdout, res.Stderr)
	}

	bot.accept()
	sum := pauseRun(t, url, bot, asOf.Add(24*time.Hour))
	if _, keys, repeats := bot.counts(); sum.Stopped != "" || sum.Sent != messages || keys != messages || repeats != 0 {
		t.Errorf("after the clear: summary %+v, %d keys accepted, %d repeats; want all %d sent once", sum, keys, repeats, messages)
	}
	res = cmdtest.Exec(t, ctl.NewCommand, env, "pause", "list")
	if res.Code != 0 || !strings.Contains(res.Stdout, "cleared") {
		t.Errorf("pause list after the clear: exit %d, %q; want the pause shown cleared", res.Code, res.Stdout)
	}
}
