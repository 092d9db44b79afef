package main_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 42's first finding: the budget's line keeps its order. A backlog
// of 150 under --daily-limit 30, one run a day a few minutes after the
// window frees, each day's run starting two seconds earlier than the day
// before (as cron start times wander), by 1 and by 10 processes at once.
// From the third day on, a run starts after the head of the line came due
// (the line forecast its slots from the first day's claims) but before the
// slots the day before spent really free: the head finds no room, and must
// keep its place (on 7559505 it went to the back of the line, and the
// third window sent places 90–119 while 60–89 waited). The sent order must
// be the line's order: each window the next places, none skipped, none
// twice. The same holds with runs exactly a day apart (drift 0), where
// whether a message comes due before its slot frees depends on how long
// each run took (on a loaded machine, it did).
func TestBudgetLineKeepsItsOrderAsRunsWander(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		procs int
		drift time.Duration // how much earlier each day's run starts than the day before's
	}{{1, 2 * time.Second}, {10, 2 * time.Second}, {1, 0}, {10, 0}} {
		procs := c.procs
		t.Run(fmt.Sprintf("%d processes, %s earlier each day", procs, c.drift), func(t *testing.T) {
			t.Parallel()
			const n, limit = 150, 30
			bin := binary(t)
			pool, url := pgtest.NewPool(t)
			bot := newRecipients(t)
			fixture.DueToRecipients(t, pool, n, "budget-")
			start := fixture.Now(t, pool)
			env := cmdtest.Env("DATABASE_URL=" + url)
			seen := map[string]bool{}
			next := 0        // the next place in line due to go
			waitedAgain := 0 // messages held back again after day 0: the line's forecast was early
			var windows []string
			for day := 0; next < n; day++ {
				if day > 2*n/limit+2 {
					t.Fatalf("after %d days %d of %d were sent: the line does not drain (%s)", day, next, n, strings.Join(windows, "; "))
				}
				// The first run takes the first 30 at once; each later one
				// comes a few minutes after the window frees, two seconds
				// earlier each day.
				asOf := start
				if day > 0 {
					asOf = start.Add(time.Duration(day)*delivery.BudgetWindow + 5*time.Minute - time.Duration(day)*c.drift)
				}
				args := []string{"--transport", "webhook", "--webhook-url", bot.server.URL, "--send-interval", "0",
					"--daily-limit", strconv.Itoa(limit), "--output", "json",
					"--as-of", asOf.UTC().Format(time.RFC3339Nano), "--allow-future-as-of"}
				deferred := runAll(t, bin, env, procs, args)
				if day > 0 {
					waitedAgain += deferred
				}
				places := placesOf(t, bot.take(t, seen))
				windows = append(windows, fmt.Sprintf("day %d: %s", day, spans(places)))
				if len(places) == 0 {
					continue
				}
				want := make([]int, min(limit, n-next))
				for i := range want {
					want[i] = next + i
				}
				if !slices.Equal(places, want) {
					t.Fatalf("day %d sent places %s, want the next %d in line, %s (so far: %s)",
						day, spans(places), len(want), spans(want), strings.Join(windows, "; "))
				}
				next += len(places)
			}
			t.Logf("the line by place, window by window: %s; held back again after the first day: %d", strings.Join(windows, "; "), waitedAgain)
			if waitedAgain == 0 && c.drift > 0 {
				t.Errorf("no message came due before its slot freed: the runs did not make the line's forecast early, so they did not test it")
			}
			if got := statusCounts(t, pool); got["sent"] != n || len(got) != 1 {
				t.Errorf("statuses %v, want all %d sent", got, n)
			}
		})
	}
}

// runAll runs procs queue-process processes at once, waits for all,
// failing the test for one that does not exit 0 with its summary, and
// returns how many messages they deferred for the budget.
func runAll(t *testing.T, bin string, env []string, procs int, args []string) int {
	t.Helper()
	cmds := make([]*exec.Cmd, procs)
	outs, errOuts := make([]fmt.Stringer, procs), make([]fmt.Stringer, procs)
	for i := range cmds {
		cmds[i], outs[i], errOuts[i] = cmdtest.Command(bin, env, args...)
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	deferred := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v: %s", i, err, errOuts[i])
		}
		sum := queueSummary(t, cmdtest.Result{Stdout: outs[i].String()})
		if sum.Failed != 0 || sum.Retried != 0 {
			t.Errorf("process %d: %d failed, %d retried, want none", i, sum.Failed, sum.Retried)
		}
		deferred += sum.DeferReasons["budget"]
	}
	return deferred
}

// placesOf turns backlog keys (budget-00001 …) into places in line from 0,
// in order.
func placesOf(t *testing.T, ks []string) []int {
	t.Helper()
	places := make([]int, 0, len(ks))
	for _, k := range ks {
		i, err := strconv.Atoi(strings.TrimPrefix(k, "budget-"))
		if err != nil {
			t.Fatalf("key %q", k)
		}
		places = append(places, i-1)
	}
	slices.Sort(places)
	return places
}

// spans formats sorted places as ranges: "0–29", "60–89, 95", "none".
func spans(places []int) string {
	if len(places) == 0 {
		return "none"
	}
	var parts []string
	from := places[0]
	for i := 1; i <= len(places); i++ {
		if i < len(places) && places[i] == places[i-1]+1 {
			continue
		}
		if from == places[i-1] {
			parts = append(parts, strconv.Itoa(from))
		} else {
			parts = append(parts, fmt.Sprintf("%d–%d", from, places[i-1]))
		}
		if i < len(places) {
			from = places[i]
		}
	}
	return strings.Join(parts, ", ")
}

// Issue 42's follow-up: a dead process's slots, spent with ample room,
// come back. A process claims a batch of 40 messages to 40 recipients
// under a budget with room for 1,000 (one slot each, spent by the claim),
// sends the first and is killed -9 while the bot holds that request. Once
// its claims expire, the next run recovers them (the one in flight is
// resent under its key, the others were never sent) and sends all 40: the
// window must hold 40 recipients, not the dead claim's 40 on top (on
// 7559505 they stayed spent until the window turned).
func TestDeadProcessBudgetSlotsComeBack(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	const n = 40
	fixture.DueToRecipients(t, pool, n, "budget-")
	b := newBot(t, true) // the first request hangs until the kill
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_DAILY_LIMIT=1000")
	args := []string{"--transport", "webhook", "--webhook-url", b.server.URL, "--send-interval", "0",
		"--workers", "1", "--claim-timeout", "1h", "--output", "json"}

	dead, _, _ := cmdtest.Command(bin, env, args...)
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	<-b.arrived
	_ = dead.Process.Signal(syscall.SIGKILL)
	_ = dead.Wait()
	close(b.hold)
	claimed := fixture.CountMessages(t, pool, fixture.Messages{Status: "processing"})
	if claimed < 2 {
		t.Fatalf("the killed process held %d messages, want a batch", claimed)
	}

	// Time passes (the database's clock): the dead process's claims expire.
	fixture.ExpireClaims(t, pool)
	sum := queueSummary(t, cmdtest.Run(t, bin, env, args...))
	if got := statusCounts(t, pool); got["sent"] != n || len(got) != 1 {
		t.Fatalf("statuses %v, want all %d sent", got, n)
	}
	if sum.Budget == nil || sum.Budget.Used != n {
		t.Errorf("after the recovery the budget is %+v, want the %d recipients in the window, not the %d slots of the dead process's claim on top",
			sum.Budget, n, claimed)
	}
}
