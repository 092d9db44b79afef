package main_test

import (
	"maps"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The chaos run beside two CPU burners (TestChaosEveryOrderLosesNothing,
// on a fresh clone in CI): "202 users got a goodbye under a daily limit
// of 200". A process whose lease ran out while it was descheduled (here:
// stopped, SIGSTOP, past its 1 s lease) had its claims settled by
// recovery, in doubt, their budget slots kept, and sent again by the
// next process without a slot of their own (the claim that may have sent
// them spent it). Resumed, the stale process handed back what it thought
// it still held, unsent: release.sql changed nothing (the claims were no
// longer its), yet their slots were given back, and the next run spent
// them on other users.
//
// A process claims 4 goodbyes of 8 under --daily-limit 4 and sends the
// first, which the bot holds unanswered; it is stopped until its lease
// runs out; another run settles its claims and sends them (the budget
// full, the other 4 wait); the stopped process is resumed and ends; a
// last run finds the budget still full. No more than 4 users ever get a
// goodbye.
func TestAProcessPausedPastItsLeaseGivesNoSlotBack(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	const users, limit = 8, 4
	goodbyesDue(t, pool, fixture.Now(t, pool), users)
	bot := newDedupBot(t, 0) // holds every send until answerAll
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_DAILY_LIMIT="+strconv.Itoa(limit))
	args := []string{"--transport", "webhook", "--webhook-url", bot.server.URL, "--send-interval", "5ms",
		"--workers", "1", "--claim-timeout", "1s", "--output", "json"}

	stale, _, stderr := cmdtest.Command(bin, env, args...)
	if err := stale.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stale.Process.Kill() })
	if n, ok := fixture.PollFor(time.Minute, func() (int, bool) { n := len(bot.sentKeys(t)); return n, n >= 1 }); !ok {
		t.Fatalf("the bot got %d sends in a minute", n)
	}
	if err := stale.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Its lease runs out on the database's clock (and so on its own: the
	// lease it knows counts from before its renewal was sent).
	if _, ok := fixture.PollFor(time.Minute, func() (int, bool) {
		n := fixture.HolderLeases(t, pool).Expired
		return n, n == 1
	}); !ok {
		t.Fatal("the stopped process's lease never ran out")
	}
	bot.answerAll()
	next := queueSummary(t, cmdtest.Run(t, bin, env, args...))
	if next.Recovered == 0 {
		t.Fatalf("the next run settled none of the stopped process's claims: %+v", next)
	}
	if err := stale.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	_ = stale.Wait()
	t.Logf("the stopped process, resumed: exit %d; %s", stale.ProcessState.ExitCode(), lastLines(stderr.String(), 2))
	queueSummary(t, cmdtest.Run(t, bin, env, args...))

	sent := bot.sentKeys(t)
	if len(sent) > limit {
		t.Errorf("%d users got a goodbye under a daily limit of %d: %v", len(sent), limit, slices.Sorted(maps.Keys(sent)))
	}
	if used := fixture.Deref(fixture.BudgetOf(t, pool, "webhook").Used); used < len(sent) {
		t.Errorf("the budget counts %d recipients in its window; %d got a goodbye", used, len(sent))
	}
}
