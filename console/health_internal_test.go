package console

import (
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/status"
	"github.com/engagement-scheduler/engagement/verify"
)

// The health summary's rules, at their thresholds (docs/console.md).
func TestHealthRules(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := asOf.Add(-d); return &x }
	hours := func(h float64) float64 { return h * 3600 }

	latency := []struct {
		name   string
		p95    float64
		oldest *time.Time
		want   string
	}{
		{"quick", hours(0.5), nil, Green},
		{"an hour exactly", hours(1), nil, Green},
		{"over an hour", hours(1.1), nil, Amber},
		// Issue 41: a p95 of 14 h never turned the card red.
		{"14 h", hours(14), nil, Red},
		{"nothing sent, the oldest due waits 7 h", 0, at(7 * time.Hour), Red},
		{"nothing sent, the oldest due waits 2 h", 0, at(2 * time.Hour), Amber},
	}
	for _, c := range latency {
		q := Queue{AsOf: asOf, Latency: Latency{P95: c.p95, Sent: 10}, Pending: Pending{OldestDue: c.oldest}}
		if got := q.LatencyHealth(); got.Level != c.want || got.Rule == "" {
			t.Errorf("latency, %s: %s (%q), want %s", c.name, got.Level, got.Rule, c.want)
		}
	}

	failed := []struct {
		name         string
		failed, sent int64
		want         string
	}{
		{"none", 0, 100, Green},
		{"one in a hundred", 1, 99, Amber},
		{"5 in a hundred", 5, 95, Red},
		{"failed, nothing sent", 3, 0, Red},
	}
	for _, c := range failed {
		q := Queue{FailedLastDay: c.failed, Latency: Latency{Sent: c.sent}}
		if got := q.failedHealth(); got.Level != c.want {
			t.Errorf("failed, %s: %s, want %s", c.name, got.Level, c.want)
		}
	}

	budget := []struct {
		name    string
		waiting int64
		clears  time.Duration
		want    string
	}{
		{"nothing waits", 0, 0, Green},
		{"clears in 5 h", 420, 5 * time.Hour, Amber},
		{"clears in 30 h", 420, 30 * time.Hour, Red},
	}
	for _, c := range budget {
		q := Queue{Pending: Pending{Budget: c.waiting}}
		if c.waiting > 0 {
			b := Budget{clearsAfter: c.clears, ClearsIn: until(c.clears)}
			b.ClearsAt = at(-c.clears)
			q.Budgets = []Budget{b}
		}
		if got := q.budgetHealth(); got.Level != c.want {
			t.Errorf("budget, %s: %s, want %s", c.name, got.Level, c.want)
		}
	}

	if got := verifyHealth(Verify{&verify.Report{OK: false, Broken: []string{"log_matches_state"}}}); got.Level != Red ||
		!strings.Contains(got.Detail, "log_matches_state") {
		t.Errorf("a broken invariant: %+v, want red naming it", got)
	}
	if got := verifyHealth(Verify{&verify.Report{OK: true, Checks: make([]verify.Check, 9)}}); got.Level != Green || got.Value != "all 9 hold" {
		t.Errorf("every invariant holds: %+v, want green", got)
	}

	run := func(job, shard, st string, ago time.Duration) status.Run {
		return status.Run{Job: job, Shard: shard, Status: st, StartedAt: *at(ago), AsOf: *at(ago)}
	}
	runs := []struct {
		name string
		job  string
		runs []status.Run
		want string
	}{
		{"daily, never", scheduler.DailyJob, nil, Red},
		{"daily, 25 h ago", scheduler.DailyJob, []status.Run{run(scheduler.DailyJob, "", "succeeded", 25*time.Hour)}, Green},
		{"daily, 27 h ago", scheduler.DailyJob, []status.Run{run(scheduler.DailyJob, "", "succeeded", 27*time.Hour)}, Red},
		{"daily, failed", scheduler.DailyJob, []status.Run{run(scheduler.DailyJob, "", "failed", time.Hour)}, Red},
		{"daily, partial", scheduler.DailyJob, []status.Run{run(scheduler.DailyJob, "", "partial", time.Hour)}, Amber},
		// A SIGTERM's stop is no failure, but the day's work is not all
		// done (issue 55): amber, never red.
		{"daily, stopped", scheduler.DailyJob, []status.Run{run(scheduler.DailyJob, "", scheduler.RunStopped, time.Hour)}, Amber},
		{"weekly, stopped", scheduler.WeeklyJob, []status.Run{run(scheduler.WeeklyJob, "", scheduler.RunStopped, time.Hour)}, Amber},
		{"daily, running for 30 h", scheduler.DailyJob, []status.Run{run(scheduler.DailyJob, "", "running", 30*time.Hour)}, Green},
		{"daily, one shard of two failed", scheduler.DailyJob, []status.Run{
			run(scheduler.DailyJob, "1/2", "failed", 2*time.Hour), run(scheduler.DailyJob, "2/2", "succeeded", time.Hour)}, Red},
		{"weekly, 6 days ago", scheduler.WeeklyJob, []status.Run{run(scheduler.WeeklyJob, "", "succeeded", 6*24*time.Hour)}, Green},
		{"weekly, 9 days ago", scheduler.WeeklyJob, []status.Run{run(scheduler.WeeklyJob, "", "succeeded", 9*24*time.Hour)}, Red},
		{"queue-process, no run recorded", DeliveryJob, nil, Amber},
		{"queue-process, 10 min ago", DeliveryJob, []status.Run{run(DeliveryJob, "", "succeeded", 10*time.Minute)}, Green},
		{"queue-process, 2 h ago", DeliveryJob, []status.Run{run(DeliveryJob, "", "succeeded", 2*time.Hour)}, Amber},
		{"queue-process, 7 h ago", DeliveryJob, []status.Run{run(DeliveryJob, "", "succeeded", 7*time.Hour)}, Red},
		// A queue-process run in progress is 'delivering' (it holds no
		// lease): as fresh as a job's running run.
		{"queue-process, delivering for 2 h", DeliveryJob, []status.Run{run(DeliveryJob, "", "delivering", 2*time.Hour)}, Green},
		{"queue-process, delivering for 7 h", DeliveryJob, []status.Run{run(DeliveryJob, "", "delivering", 7*time.Hour)}, Green},
	}
	for _, c := range runs {
		got := runHealth(asOf, c.job, c.runs)
		if got.Level != c.want || got.Rule == "" {
			t.Errorf("%s: %s (%s), want %s", c.name, got.Level, got.Value, c.want)
		}
		if len(c.runs) == 0 {
			if got.Value != "no run recorded" {
				t.Errorf("%s: says %q, want \"no run recorded\"", c.name, got.Value)
			}
		}
	}
}

// The demo's console (issue 61): a run simulated ahead (--as-of two days
// past its start) is judged by its as-of, green, and its card said
// "started 2 days ago", against its own rule; it says what it was judged
// by.
func TestASimulatedRunSaysItsAsOf(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 12, 1, 19, 40, 0, 0, time.UTC)
	r := status.Run{Job: DeliveryJob, Status: "succeeded", StartedAt: asOf.Add(-58 * time.Hour), AsOf: asOf.Add(-10 * time.Minute)}
	got := runHealth(asOf, DeliveryJob, []status.Run{r})
	if want := "as of 10 min ago (simulated ahead; started 2 days ago)"; got.Level != Green || got.Detail != want {
		t.Errorf("a simulated run: %s, %q; want green, %q", got.Level, got.Detail, want)
	}
}

// The summary judges each health job's shards that ran within shardSpan
// of its latest run: a shard that stopped long ago is not held against it.
func TestLatestRunsKeepTheShardsOfTheLatestSpan(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	run := func(job, shard string, ago time.Duration) status.Run {
		return status.Run{Job: job, Shard: shard, Status: "succeeded", StartedAt: asOf.Add(-ago)}
	}
	got := latestRuns([]status.Run{
		run("another-job", "", time.Hour),
		run(DeliveryJob, "", 5*time.Minute),
		run(scheduler.DailyJob, "1/2", 30*time.Hour), // before the sharding changed: out of the span
		run(scheduler.DailyJob, "1/3", 2*time.Hour),
		run(scheduler.DailyJob, "2/3", 1*time.Hour),
	})
	var names []string
	for _, r := range got {
		names = append(names, r.Job+" "+r.Shard)
	}
	want := []string{scheduler.DailyJob + " 1/3", scheduler.DailyJob + " 2/3", DeliveryJob + " "}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("latest runs: %q, want %q", names, want)
	}
}
