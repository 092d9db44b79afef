package main_test

import (
	"slices"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// warmUpDay runs the shipped queue-process on the webhook to bot, as of
// the ramp's day d (each day 24 h and a minute after the last, so that
// the last day's sends have left the budget's window), with env and args.
func warmUpDay(t *testing.T, url string, bot *recipients, start time.Time, d int, env []string, args ...string) delivery.ProcessSummary {
	t.Helper()
	asOf := start.Add(time.Duration(d) * (delivery.BudgetWindow + time.Minute)).UTC().Format(time.RFC3339)
	return queueSummary(t, cmdtest.Run(t, binary(t), cmdtest.Env(append(env, "DATABASE_URL="+url)...),
		append([]string{"--transport", "webhook", "--webhook-url", bot.server.URL, "--send-interval", "0",
			"--as-of", asOf, "--allow-future-as-of", "--output", "json"}, args...)...))
}

// Issue 58: --warm-up (a ramp of 20 recipients the first day, 1.5 times
// more each next) under --daily-limit 100, through the shipped
// queue-process, day by day with --as-of, 400 messages to 400 recipients
// due: day 0 sends 20, then 30, 45, 67, and 100 a day from day 4, never
// more; the summary's budget limit says each day's figure. Before, there
// was no --warm-up (exit 2).
func TestWarmUpGrowsTheDailyLimitDayByDay(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	bot := newRecipients(t)
	fixture.DueToRecipients(t, pool, 400, "budget-")
	start := fixture.Now(t, pool)
	seen, sent := map[string]bool{}, 0
	for d, want := range []int{20, 30, 45, 67, 100, 100} {
		sum := warmUpDay(t, url, bot, start, d, nil, "--warm-up", "--daily-limit", "100")
		got := bot.take(t, seen)
		if wantKeys := keys(sent+1, sent+want); !slices.Equal(got, wantKeys) {
			t.Fatalf("day %d sent %d messages (%s … %s); want the next %d in due order", d, len(got), first(got), last(got), want)
		}
		if sum.Budget == nil || sum.Budget.Limit != want {
			t.Errorf("day %d: the summary's budget is %+v; want a limit of %d", d, sum.Budget, want)
		}
		sent += want
	}
}

// Issue 58: --warm-up alone (ENGAGEMENT_WARM_UP=true) grows to
// delivery.WarmUpLimit, 300 a day, from the ramp's eighth day (20 × 1.5^7
// is above it): 25 due, 20 go on day 0, the other 5 on day 7 under a
// limit of 300.
func TestWarmUpAloneGrowsTo300(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	bot := newRecipients(t)
	fixture.DueToRecipients(t, pool, 25, "budget-")
	start := fixture.Now(t, pool)
	seen := map[string]bool{}
	for _, c := range []struct{ day, sent, limit int }{{0, 20, 20}, {7, 5, delivery.WarmUpLimit}} {
		sum := warmUpDay(t, url, bot, start, c.day, []string{"ENGAGEMENT_WARM_UP=true"})
		if got := bot.take(t, seen); len(got) != c.sent {
			t.Errorf("day %d sent %d; want %d", c.day, len(got), c.sent)
		}
		if sum.Budget == nil || sum.Budget.Limit != c.limit {
			t.Errorf("day %d: the summary's budget is %+v; want a limit of %d", c.day, sum.Budget, c.limit)
		}
	}
}
