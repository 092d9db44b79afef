package main_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 61: the funnel's timing arms against a history worked out here by
// hand. As of Sunday 2026-11-22 06:00 UTC, 8 weeks. The daily run of
// Tuesday 2026-10-06 06:00 UTC (run 1) logged the goodbyes:
//
//	best_hour, 50 treated: sent at 23:00 UTC (20:00 in São Paulo), 17 h
//	  after the run, all but one (never sent: its clock is the log row's);
//	  answers: 12 at 47 h after the send (64 h after the run: counted, the
//	  48 h run from the send), 3 at 49 h (too late), the unsent one at 47 h
//	  after its log row (counted): 13; wrote again: 20 after 5 days, 2
//	  after 31 days (too late): 20. One of the 50 has a second goodbye
//	  two days later (counted once).
//	run_time, 50 treated: sent at 06:05; answers: 6 at 47 h, 2 at 49 h: 6;
//	  wrote again: 10 after 5 days.
//	held out, timing run_time, 5: no arm (no message, no time);
//	treated without a timing (a run without the flag), 7: no arm.
//
// and a still-open week, 2026-11-16: best_hour 4, run_time 3, not pooled.
//
// Rates: reactivated 20/50 = 0.400 and 10/50 = 0.200, difference 0.200;
// answered 13/50 = 0.260 and 6/50 = 0.120, difference 0.140. Wilson 95 %
// bounds, z = 1.96: 20/50 → (0.2761, 0.5382), 10/50 → (0.1124, 0.3304),
// 13/50 → (0.1587, 0.3955), 6/50 → (0.0562, 0.2380). Newcombe:
//
//	reactivated low  = 0.200 − √((0.400 − 0.2761)² + (0.3304 − 0.200)²) = 0.200 − √(0.01535 + 0.01700) = 0.020
//	            high = 0.200 + √((0.5382 − 0.400)² + (0.200 − 0.1124)²) = 0.200 + √(0.01910 + 0.00767) = 0.364
//	answered    low  = 0.140 − √((0.260 − 0.1587)² + (0.2380 − 0.120)²) = 0.140 − √(0.01026 + 0.01393) = −0.016
//	            high = 0.140 + √((0.3955 − 0.260)² + (0.120 − 0.0562)²) = 0.140 + √(0.01836 + 0.00407) = 0.290
//
// The user's hour brings more users back (the interval excludes zero); the
// answers cannot tell yet.
func TestFunnelTimingArmsOnAScriptedHistory(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	const h, d = time.Hour, 24 * time.Hour
	run := time.Date(2026, 10, 6, 6, 0, 0, 0, time.UTC)
	goodbyes := func(at time.Time, runID int64, timing string, holdout bool, n int) []string {
		users := make([]string, n)
		for i := range users {
			users[i] = fixture.NewID()
			fixture.LogMove(t, pool, fixture.Move{User: users[i], From: "active", To: "goodbye_sent", Trigger: "inactivity_14d",
				RunID: runID, Holdout: holdout, Timing: timing, At: at})
		}
		return users
	}
	sent := func(users []string, runID int64, at time.Time) {
		for _, u := range users {
			fixture.Queue(t, pool, fixture.Message{User: u, Type: "goodbye", JID: "demo@s.whatsapp.net", Status: "sent", SentAt: at,
				PeriodStart: run.Truncate(d), RunID: runID, Key: u + ":goodbye_sent"})
		}
	}
	move := func(users []string, from, to, trigger string, at time.Time) {
		for _, u := range users {
			fixture.LogMove(t, pool, fixture.Move{User: u, From: from, To: to, Trigger: trigger, At: at})
		}
	}
	answer := func(users []string, at time.Time) {
		move(users, "goodbye_sent", "help_flow", "goodbye_answer_help", at)
	}
	back := func(users []string, at time.Time) { move(users, "dormant", "active", "user_message", at) }

	best := goodbyes(run, 1, "best_hour", false, 50)
	bestSent := run.Add(17 * h)
	sent(best[:49], 1, bestSent)
	answer(best[:12], bestSent.Add(47*h))
	answer(best[12:15], bestSent.Add(49*h))
	answer(best[49:], run.Add(47*h))
	back(best[15:35], run.Add(5*d))
	back(best[35:37], run.Add(31*d))
	fixture.LogMove(t, pool, fixture.Move{User: best[40], From: "active", To: "goodbye_sent", Trigger: "inactivity_14d",
		RunID: 2, Timing: "best_hour", At: run.Add(2 * d)})

	runTime := goodbyes(run, 1, "run_time", false, 50)
	runSent := run.Add(5 * time.Minute)
	sent(runTime, 1, runSent)
	answer(runTime[:6], runSent.Add(47*h))
	answer(runTime[6:8], runSent.Add(49*h))
	back(runTime[10:20], run.Add(5*d))

	answer(goodbyes(run, 1, "run_time", true, 5), run.Add(h))
	answer(goodbyes(run, 1, "", false, 7), run.Add(h))

	open := time.Date(2026, 11, 17, 6, 0, 0, 0, time.UTC)
	goodbyes(open, 3, "best_hour", false, 4)
	goodbyes(open, 3, "run_time", false, 3)

	asOf := []string{"--as-of", "2026-11-22T06:00:00Z", "--weeks", "8"}
	res := cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"funnel", "--output", "json"}, asOf...)...)
	if res.Code != 0 {
		t.Fatalf("funnel --output json: exit %d: %s", res.Code, res.Stderr)
	}
	type arm struct {
		Users       int64
		Answered48h *int64 `json:"answered_48h"`
		Reactivated int64
	}
	type lift struct {
		Difference, Low, High float64
		Verdict               string
	}
	type timing struct {
		BestHour      *arm `json:"best_hour"`
		RunTime       *arm `json:"run_time"`
		Lift          lift
		AnsweredLift  lift `json:"answered_lift"`
		PooledCohorts int  `json:"pooled_cohorts"`
	}
	var rep struct {
		Cohorts []struct {
			WeekStart time.Time `json:"week_start"`
			Timing    *timing
		}
		Timing *timing
	}
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("stdout is not the report (%v): %s", err, res.Stdout)
	}
	if len(rep.Cohorts) != 2 || rep.Cohorts[0].Timing == nil || rep.Cohorts[1].Timing == nil || rep.Timing == nil {
		t.Fatalf("want two cohorts with timing and pooled timing: %s", res.Stdout)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 0.0005 }
	check := func(what string, got *timing, best, runTime arm, rl, al lift) {
		t.Helper()
		if got.BestHour == nil || got.RunTime == nil || got.BestHour.Answered48h == nil || got.RunTime.Answered48h == nil {
			t.Fatalf("%s: arms without users, answered_48h and reactivated: %+v", what, got)
		}
		armText := func(a arm) string {
			return fmt.Sprintf("%d users, %d answered, %d back", a.Users, *a.Answered48h, a.Reactivated)
		}
		if g, w := armText(*got.BestHour), armText(best); g != w {
			t.Errorf("%s best_hour: %s, want %s", what, g, w)
		}
		if g, w := armText(*got.RunTime), armText(runTime); g != w {
			t.Errorf("%s run_time: %s, want %s", what, g, w)
		}
		for _, l := range []struct {
			name      string
			got, want lift
		}{{"lift", got.Lift, rl}, {"answered_lift", got.AnsweredLift, al}} {
			if !near(l.got.Difference, l.want.Difference) || !near(l.got.Low, l.want.Low) || !near(l.got.High, l.want.High) ||
				!strings.HasPrefix(l.got.Verdict, l.want.Verdict) {
				t.Errorf("%s %s: %.3f (%.3f, %.3f) %q; want %.3f (%.3f, %.3f) %q", what, l.name, l.got.Difference, l.got.Low, l.got.High,
					l.got.Verdict, l.want.Difference, l.want.Low, l.want.High, l.want.Verdict)
			}
		}
	}
	n := func(v int64) *int64 { return &v }
	reactivated := lift{0.200, 0.020, 0.364, "the user's hour brings more users back than the run's time: +20.0 points (95 % CI +2.0 to +36.4)"}
	answered := lift{0.140, -0.016, 0.290, "not enough users yet to tell: +14.0 points"}
	check("week of 2026-10-05", rep.Cohorts[0].Timing, arm{50, n(13), 20}, arm{50, n(6), 10}, reactivated, answered)
	check("pooled", rep.Timing, arm{50, n(13), 20}, arm{50, n(6), 10}, reactivated, answered)
	check("week of 2026-11-16", rep.Cohorts[1].Timing, arm{4, n(0), 0}, arm{3, n(0), 0},
		lift{0, -0.561, 0.490, "still counting: not enough users yet to tell"}, lift{0, -0.561, 0.490, "still counting"})
	if rep.Timing.PooledCohorts != 1 {
		t.Errorf("pooled over %d cohorts, want 1 (the open week is not pooled)", rep.Timing.PooledCohorts)
	}

	text := cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"funnel"}, asOf...)...)
	for _, want := range []string{"best hour", "run time", "+20.0 (+2.0 to +36.4)", "+14.0 (-1.6 to +29.0)",
		"reactivated: the user's hour brings more users back"} {
		if text.Code != 0 || !strings.Contains(text.Stdout, want) {
			t.Errorf("funnel text lacks %q: exit %d:\n%s%s", want, text.Code, text.Stdout, text.Stderr)
		}
	}
}

// Without a timing on any goodbye (runs without --best-hour-percent), the
// report has no "timing" and the text no timing table.
func TestFunnelWithoutTimingSaysNothingOfIt(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	fixture.LogMove(t, pool, fixture.Move{User: fixture.NewID(), From: "active", To: "goodbye_sent", Trigger: "inactivity_14d",
		At: time.Date(2026, 10, 6, 6, 0, 0, 0, time.UTC)})
	asOf := []string{"--as-of", "2026-11-22T06:00:00Z", "--weeks", "8"}
	res := cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"funnel", "--output", "json"}, asOf...)...)
	if res.Code != 0 || strings.Contains(res.Stdout, `"timing"`) {
		t.Errorf("funnel --output json without timed goodbyes: exit %d, want no timing: %s%s", res.Code, res.Stdout, res.Stderr)
	}
	text := cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"funnel"}, asOf...)...)
	if text.Code != 0 || strings.Contains(text.Stdout, "best hour") {
		t.Errorf("funnel text without timed goodbyes: exit %d:\n%s%s", text.Code, text.Stdout, text.Stderr)
	}
}
