package main_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// recipients is a bot webhook that answers 200 at once and counts the
// requests for each idempotency key.
type recipients struct {
	mu     sync.Mutex
	byKey  map[string]int
	server *httptest.Server
}

func newRecipients(t *testing.T) *recipients {
	r := &recipients{byKey: map[string]int{}}
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.byKey[req.Header.Get("Idempotency-Key")]++
		r.mu.Unlock()
	}))
	t.Cleanup(r.server.Close)
	return r
}

// take returns the keys requested since the last take, and fails the test
// for a key requested twice, ever.
func (r *recipients) take(t *testing.T, seen map[string]bool) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys []string
	for k, n := range r.byKey {
		if n > 1 {
			t.Errorf("message %s was requested %d times", k, n)
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func queueSummary(t *testing.T, res cmdtest.Result) delivery.ProcessSummary {
	t.Helper()
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	var sum delivery.ProcessSummary
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatalf("summary %q: %v", res.Stdout, err)
	}
	return sum
}

// Issue 34's first acceptance point: 30 due messages to 30 recipients,
// --daily-limit 10, two processes at once. Exactly 10 recipients get a
// request; the 20 others stay pending with their retries unspent, a day
// on; a further run sends nothing; with the clock moved past the window
// (--as-of a day and a minute on) the next 10 go, and the last 10 wait
// for the window after.
func TestDailyLimitHoldsAcrossTwoProcesses(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	bot := newRecipients(t)
	fixture.DueToRecipients(t, pool, 30, "budget-")
	start := fixture.Now(t, pool)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_DAILY_LIMIT=10")
	// Paced, each worker claims 4 at a time: the two processes' 32 workers
	// claim side by side, and the budget is all that keeps them to 10.
	args := []string{"--transport", "webhook", "--webhook-url", bot.server.URL, "--send-interval", "5ms", "--output", "json"}

	var (
		cmds    [2]*exec.Cmd
		outs    [2]fmt.Stringer
		errOuts [2]fmt.Stringer
	)
	for i := range cmds {
		cmd, out, errOut := cmdtest.Command(bin, env, args...)
		cmds[i], outs[i], errOuts[i] = cmd, out, errOut
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	deferred := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v: %s", i, err, errOuts[i])
		}
		sum := queueSummary(t, cmdtest.Result{Stdout: outs[i].String()})
		deferred += sum.DeferReasons["budget"]
		if sum.Budget == nil || sum.Budget.Limit != 10 {
			t.Errorf("process %d: budget %+v, want the limit of 10 in the summary", i, sum.Budget)
		}
	}
	seen := map[string]bool{}
	first := bot.take(t, seen)
	if len(first) != 10 || deferred != 20 {
		t.Fatalf("%d recipients got a request and %d messages were deferred for the budget, want 10 and 20", len(first), deferred)
	}
	if want := keys(1, 10); !slices.Equal(first, want) {
		t.Errorf("the first window sent %v, want the 10 due first, %v", first, want)
	}
	f := fixture.SendFiguresOf(t, pool, start.Add(24*time.Hour))
	pending, unspent, waiting, early := f.Pending, f.PendingUnspent, f.OnBudget, f.PendingDueBefore
	if pending != 20 || unspent != 20 || waiting != 20 || early != 0 {
		t.Errorf("pending %d (retries unspent %d, waiting on the budget %d, due within the window %d), want 20, 20, 20, 0",
			pending, unspent, waiting, early)
	}

	// engagementctl status shows it: the window full, the next slot a day
	// after the first claims, and the line through a day after that.
	st := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+url), "status", "--output", "json")
	var report struct{ Budgets []delivery.BudgetReport }
	if err := json.Unmarshal([]byte(st.Stdout), &report); st.Code != 0 || err != nil || len(report.Budgets) != 1 {
		t.Fatalf("status: exit %d, %v: %s%s", st.Code, err, st.Stdout, st.Stderr)
	}
	b := report.Budgets[0]
	if b.Transport != "webhook" || b.Used != 10 || b.Limit != 10 || b.Waiting != 20 || b.NextSlotAt == nil || b.ClearsAt == nil ||
		!near(*b.NextSlotAt, start.Add(delivery.BudgetWindow)) || !near(*b.ClearsAt, start.Add(2*delivery.BudgetWindow)) {
		t.Errorf("status reports the budget as %+v, want webhook's 10 of 10 used, 20 waiting, the next slot in a day, the line through in two", b)
	}
	text := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+url), "status")
	if !strings.Contains(text.Stdout, "send budget on webhook: 10 recipients in the last 24 h of 10 a day; full") ||
		!strings.Contains(text.Stdout, "waiting on it: 20 messages; at this rate the last goes at") {
		t.Errorf("status does not show the budget:\n%s", text.Stdout)
	}

	again := queueSummary(t, cmdtest.Run(t, bin, env, args...))
	if got := bot.take(t, seen); len(got) != 0 || again.Sent != 0 {
		t.Errorf("a further run sent %d (requests %v), want nothing", again.Sent, got)
	}

	asOf := start.Add(delivery.BudgetWindow + time.Minute).UTC().Format(time.RFC3339)
	later := queueSummary(t, cmdtest.Run(t, bin, env, append(args, "--as-of", asOf, "--allow-future-as-of")...))
	second := bot.take(t, seen)
	if want := keys(11, 20); !slices.Equal(second, want) || later.Sent != 10 {
		t.Errorf("a day later %d were sent: %v, want the next 10, %v", later.Sent, second, want)
	}
	if later.Budget == nil || later.Budget.Used != 10 || later.Budget.Waiting != 10 || later.Budget.NextSlotAt == nil {
		t.Errorf("a day later the budget is %+v, want 10 used, 10 waiting and the next slot's time", later.Budget)
	}
}

// Issue 34's second acceptance point: a backlog of 5,000 under a limit of
// 1,000 drains over 5 windows, each the next 1,000 in the order they came
// due, none sent twice, none failed. The same with one worker (--workers
// 1), on a backlog of 1,500 under 300: the run must put the whole backlog
// in line, not stop at the second claim that held everything back (the
// next window then sent the messages it never reached before the line).
func TestBacklogDrainsInOrderUnderTheBudget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n, limit int
		workers  string
	}{{5000, 1000, ""}, {1500, 300, "1"}} {
		t.Run(fmt.Sprintf("%d under %d, workers %s", c.n, c.limit, cmp.Or(c.workers, "default")), func(t *testing.T) {
			t.Parallel()
			backlogDrainsInOrder(t, c.n, c.limit, c.workers)
		})
	}
}

func backlogDrainsInOrder(t *testing.T, n, limit int, workers string) {
	t.Helper()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	bot := newRecipients(t)
	fixture.DueToRecipients(t, pool, n, "budget-")
	start := fixture.Now(t, pool)
	env := cmdtest.Env("DATABASE_URL=" + url)
	seen := map[string]bool{}
	for w := range n / limit {
		args := []string{"--transport", "webhook", "--webhook-url", bot.server.URL, "--send-interval", "0",
			"--daily-limit", strconv.Itoa(limit), "--output", "json"}
		if workers != "" {
			args = append(args, "--workers", workers)
		}
		if w > 0 {
			asOf := start.Add(time.Duration(w) * (delivery.BudgetWindow + time.Minute)).UTC().Format(time.RFC3339)
			args = append(args, "--as-of", asOf, "--allow-future-as-of")
		}
		sum := queueSummary(t, cmdtest.Run(t, bin, env, args...))
		got := bot.take(t, seen)
		if want := keys(w*limit+1, (w+1)*limit); !slices.Equal(got, want) {
			t.Fatalf("window %d sent %d messages (%s … %s), want the next %d in due order (%s … %s)",
				w+1, len(got), first(got), last(got), limit, want[0], want[len(want)-1])
		}
		if sum.Failed != 0 || sum.Retried != 0 {
			t.Errorf("window %d: %d failed, %d retried, want none", w+1, sum.Failed, sum.Retried)
		}
	}
	if got := statusCounts(t, pool); got["sent"] != n || len(got) != 1 {
		t.Errorf("statuses %v, want all %d sent", got, n)
	}
}

// near reports whether a is within a minute of b: the claims took a moment.
func near(a, b time.Time) bool { return a.Sub(b).Abs() < time.Minute }

// keys are the idempotency keys of backlog messages from to to.
func keys(from, to int) []string {
	var ks []string
	for i := from; i <= to; i++ {
		ks = append(ks, fmt.Sprintf("budget-%05d", i))
	}
	return ks
}

func first(ks []string) string { return strings.Join(ks[:min(1, len(ks))], "") }

func last(ks []string) string { return strings.Join(ks[max(len(ks)-1, 0):], "") }
