package main_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// fleet keeps n queue-process binaries running with args, starting a new
// one whenever one exits, and kills one with SIGKILL when told to, as a
// cron platform and a crashing host would. Exits other than the kills are
// recorded by code.
type fleet struct {
	t     *testing.T
	bin   string
	env   []string
	args  []string
	mu    sync.Mutex
	procs []*exec.Cmd
	exits map[int]int // exit code → how many processes exited with it on their own
	kills int
	done  bool
	wg    sync.WaitGroup
}

func startFleet(t *testing.T, n int, env []string, args ...string) *fleet {
	f := &fleet{t: t, bin: binary(t), env: env, args: args, procs: make([]*exec.Cmd, n), exits: map[int]int{}}
	for i := range n {
		f.wg.Go(func() { f.keep(i) })
	}
	return f
}

// keep runs slot i's process again and again until stop.
func (f *fleet) keep(i int) {
	for {
		f.mu.Lock()
		if f.done {
			f.mu.Unlock()
			return
		}
		cmd, _, _ := cmdtest.Command(f.bin, f.env, f.args...)
		if err := cmd.Start(); err != nil {
			f.mu.Unlock()
			f.t.Error(err)
			return
		}
		f.procs[i] = cmd
		f.mu.Unlock()
		err := cmd.Wait()
		f.mu.Lock()
		f.procs[i] = nil // exited: kill no longer looks at it (Wait wrote its state)
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			code := 0
			if err != nil {
				code = cmd.ProcessState.ExitCode()
			}
			f.exits[code]++
		}
		f.mu.Unlock()
		if err == nil {
			// Nothing left to do for now: the next cron tick.
			time.Sleep(200 * time.Millisecond) // pacing the restarts, not a clock
		}
	}
}

// kill sends SIGKILL to one running process, chosen by rng. When every
// slot is between processes (each waits 200 ms after a run that found
// nothing to do), it waits for the next to start, 2 s at most: on a fast
// machine the slots were often all idle, and a kill that skipped them
// left a chaos run with 16 kills of 36.
func (f *fleet) kill(rng *rand.Rand) {
	running, _ := fixture.PollFor(2*time.Second, func() ([]*exec.Cmd, bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var running []*exec.Cmd
		for _, p := range f.procs {
			if p != nil {
				running = append(running, p)
			}
		}
		return running, len(running) > 0
	})
	if len(running) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := running[rng.IntN(len(running))]
	if slices.Contains(f.procs, p) && p.Process.Signal(syscall.SIGKILL) == nil {
		f.kills++
	}
}

// stop kills every process and waits for the slots to end.
func (f *fleet) stop() {
	f.mu.Lock()
	f.done = true
	for _, p := range f.procs {
		if p != nil {
			_ = p.Process.Signal(syscall.SIGKILL)
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// drain runs queue-process until nothing is pending and due or processing,
// at most 10 times, each run's exit 0.
func drain(t *testing.T, pool *pgxpool.Pool, env []string, args ...string) {
	t.Helper()
	for range 10 {
		if fixture.SendFiguresOf(t, pool, time.Time{}).ToDrain == 0 {
			return
		}
		if res := cmdtest.Run(t, binary(t), env, append(args, "--max-duration", "30s")...); res.Code != 0 {
			t.Fatalf("draining run: exit %d: %s", res.Code, lastLines(res.Stderr, 3))
		}
	}
	t.Fatalf("the queue does not drain: %v", statusCounts(t, pool))
}

// The combined chaos run of issue 42, on the webhook: three processes kept
// running as a cron platform would, killed -9 at random moments
// throughout; the bot's webhook down (503) for about two seconds; PostgreSQL
// restarted under them. Once the faults stop and the queue drains, every
// message is sent, and every message marked sent reached the bot under
// its own key (repeats are allowed on a de-duplicating transport: a send
// cut short is sent again under the same key, and the bot drops it).
func TestCombinedChaosLosesNothing(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	pool, err := pgxpool.New(context.Background(), cluster.URL) // not the binaries' pool: the test's fixture and checks
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	const messages = 2000
	queueMessages(t, pool, messages)
	rcv := newCounter(t, 2*time.Millisecond)
	env := cmdtest.Env("DATABASE_URL="+cluster.URL, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+rcv.server.URL)
	args := []string{"--send-interval", "0", "--workers", "4", "--claim-timeout", "1s", "--retry-base", "10ms",
		"--max-duration", "20s", "--output", "json"}

	killer := rand.New(rand.NewPCG(42, 42)) //nolint:gosec // seeded: the kills repeat from run to run
	f := startFleet(t, 3, env, args...)
	waitForRequests(t, rcv, 100)
	for step := 0; step < 30; step++ {
		time.Sleep(time.Duration(100+killer.IntN(200)) * time.Millisecond) // moments for the faults, not a clock
		f.kill(killer)
		switch step {
		case 6:
			rcv.setDown(http.StatusServiceUnavailable)
		case 16:
			rcv.setDown(0)
		case 20:
			cluster.Restart(t)
			pool.Reset()
		}
	}
	f.stop()

	fixture.ExpireClaims(t, pool)
	drain(t, pool, env, args...)
	keys, repeats := rcv.delivered()
	got := statusCounts(t, pool)
	t.Logf("%d kills, exits on their own by code %v; statuses %v; %d keys delivered, %d repeats (dropped by the bot)",
		f.kills, f.exits, got, keys, repeats)
	if got["sent"] != messages || len(got) != 1 {
		t.Errorf("statuses %v, want all %d sent", got, messages)
	}
	if keys != messages {
		t.Errorf("the bot got %d distinct keys, want every one of the %d messages", keys, messages)
	}
	if f.kills < 20 {
		t.Errorf("only %d kills: the run did not test much", f.kills)
	}
	for code, n := range f.exits {
		if code != 0 && code != 1 {
			t.Errorf("%d processes exited %d on their own", n, code)
		}
	}
}

// The send budget across 10 processes killed -9 at random moments: 300
// messages to 300 recipients under --daily-limit 40. However the kills
// fall (a claim's slots spent and its process gone, a recovery giving them
// back), no more than 40 recipients ever get a request, and nothing is
// failed: the rest wait on the budget, their retries unspent.
func TestBudgetHoldsAcrossTenProcessesWithKills(t *testing.T) {
	t.Parallel()
	budgetAcrossTenProcesses(t)
}

// The same with the number's protections on (issue 46): the kinds in
// order, a per-user cap (the 300 messages are one user's: a cap of 1,000
// a week runs its statements without holding any) and jitter on the pace.
func TestBudgetHoldsAcrossTenProcessesWithPriorityCapAndJitter(t *testing.T) {
	t.Parallel()
	budgetAcrossTenProcesses(t, "--kind-priority", "reminder,goodbye,weekly_review", "--per-user-cap", "1000",
		"--send-jitter", "5ms")
}

func budgetAcrossTenProcesses(t *testing.T, extra ...string) {
	t.Helper()
	pool, url := pgtest.NewPool(t)
	const messages, limit = 300, 40
	fixture.DueToRecipients(t, pool, messages, "budget-")
	bot := newRecipients(t)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_DAILY_LIMIT="+strconv.Itoa(limit))
	args := []string{"--transport", "webhook", "--webhook-url", bot.server.URL, "--send-interval", "5ms",
		"--claim-timeout", "2s", "--output", "json"}
	args = append(args, extra...)

	killer := rand.New(rand.NewPCG(43, 43)) //nolint:gosec // seeded: the kills repeat from run to run
	f := startFleet(t, 10, env, args...)
	for range 20 {
		time.Sleep(time.Duration(50+killer.IntN(150)) * time.Millisecond) // moments for the kills, not a clock
		f.kill(killer)
	}
	f.stop()
	fixture.ExpireClaims(t, pool)
	drain(t, pool, env, args...)

	bot.mu.Lock()
	recipients := len(bot.byKey)
	bot.mu.Unlock()
	got := statusCounts(t, pool)
	t.Logf("%d kills, exits on their own by code %v; %d recipients got a request; statuses %v", f.kills, f.exits, recipients, got)
	if recipients > limit {
		t.Errorf("%d recipients got a request under a daily limit of %d", recipients, limit)
	}
	if recipients == 0 || got["sent"] != recipients || got["pending"] != messages-recipients || got["failed"] != 0 || got["processing"] != 0 {
		t.Errorf("statuses %v with %d recipients reached, want each reached one sent and the rest pending", got, recipients)
	}
	if unspent := fixture.SendFiguresOf(t, pool, time.Time{}).OnBudgetUnspent; unspent != messages-recipients {
		t.Errorf("%d messages wait on the budget with their retries unspent, want %d", unspent, messages-recipients)
	}
	for code, n := range f.exits {
		if code != 0 {
			t.Errorf("%d processes exited %d on their own", n, code)
		}
	}
}
