package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// timingHistory logs two cohorts of treated goodbyes as the daily job with
// --best-hour-percent 50 would (as of historyAsOf): 800 in the week of
// 01-12 (closed), 100 in the week of 02-23 (still counting), half in each
// arm. Best hour: 25 % answer within 2 hours, 30 % write again after 3
// days; run time: 15 % and 20 %. Pooled: 120/400 against 80/400
// reactivated, +10.0 points, an interval above zero; answered 100/400
// against 60/400.
func timingHistory(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	for c, cohort := range []struct {
		at time.Time
		n  int
	}{{time.Date(2026, 1, 13, 6, 0, 0, 0, time.UTC), 800}, {time.Date(2026, 2, 24, 6, 0, 0, 0, time.UTC), 100}} {
		var goodbyes, answered, back []fixture.LoggedMove
		for i := 1; i <= cohort.n; i++ {
			user := fixture.NamedID(fmt.Sprintf("timing%d:%d", c, i))
			timing := map[bool]string{true: "best_hour", false: "run_time"}[i%2 == 0]
			goodbyes = append(goodbyes, fixture.LoggedMove{User: user, From: "active", To: "goodbye_sent", Trigger: "inactivity_14d",
				Timing: timing, At: cohort.at})
			if (i%2 == 0 && i%40 < 10) || (i%2 == 1 && i%40 < 6) {
				answered = append(answered, fixture.LoggedMove{User: user, From: "goodbye_sent", To: "help_flow", Trigger: "goodbye_answer_help",
					At: cohort.at.Add(2 * time.Hour)})
			}
			if r := i % 20; (i%2 == 0 && (r == 10 || r == 12 || r == 14)) || (i%2 == 1 && (r == 11 || r == 13)) {
				back = append(back, fixture.LoggedMove{User: user, From: "dormant", To: "active", Trigger: "user_message",
					At: cohort.at.AddDate(0, 0, 3)})
			}
		}
		fixture.LogMoves(t, pool, goodbyes)
		fixture.LogMoves(t, pool, answered)
		fixture.LogMoves(t, pool, back)
	}
	return pool
}

// Issue 61: the overview compares the timing arms (JSON and page) with the
// sample the comparison still needs; without timed goodbyes the card is
// not there.
func TestOverviewShowsTheTiming(t *testing.T) {
	t.Parallel()
	srv := serve(t, timingHistory(t), historyAsOf)
	_, body := get(t, srv, "/", viewer, viewerPassword, true)
	var o console.Overview
	decode(t, body, &o)
	if o.Lift == nil || o.Lift.Timing == nil {
		t.Fatalf("the overview's lift has no timing: %+v", o.Lift)
	}
	tm := o.Lift.Timing
	if tm.PooledCohorts != 1 || tm.BestHour.Users != 400 || tm.BestHour.Answered48h != 100 || tm.BestHour.Reactivated != 120 ||
		tm.RunTime.Users != 400 || tm.RunTime.Answered48h != 60 || tm.RunTime.Reactivated != 80 ||
		!strings.HasPrefix(tm.Lift.Verdict, "the user's hour brings more users back than the run's time: +10.0 points") {
		t.Errorf("pooled timing %+v; want 1 cohort, best hour 400 users, 100 answered, 120 back; run time 400, 60, 80; more users back", tm)
	}
	_, page := get(t, srv, "/", viewer, viewerPassword, false)
	for _, want := range []string{"Does the user's hour help?", "pooled, 1 weeks", "best hour", "run time", "&#43;10.0 (&#43;",
		"Answers within 48 hours: more users answer the goodbye at their hour", "best-hour and", "more needed."} {
		if !strings.Contains(page, want) {
			t.Errorf("the overview does not show %q", want)
		}
	}

	_, page = get(t, serve(t, liftHistory(t), historyAsOf), "/", viewer, viewerPassword, false)
	if strings.Contains(page, "Does the user") {
		t.Error("the overview shows the timing card without a timed goodbye")
	}
}

// Issue 61, in Chromium: the timing card's arms, bars, verdicts and the
// sample it still needs; screenshot timing.png.
func TestTimingInTheBrowser(t *testing.T) {
	t.Parallel()
	srv := serve(t, timingHistory(t), historyAsOf)
	ctx := browse(t, viewer, viewerPassword)
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/#timing"), chromedp.WaitVisible("table.timing"))
	text, err := chromedp.Run(ctx, chromedp.Text("table.timing"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"best hour", "run time", "Mon 2026-02-23*", "pooled, 1 weeks", "120 (30.0%)", "80 (20.0%)", "+10.0 (+"} {
		if !strings.Contains(text, want) {
			t.Errorf("the timing table does not show %q: %s", want, text)
		}
	}
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('table.timing svg.ci rect.ci-up').length`))
	if err != nil || bars < 2 {
		t.Errorf("%d intervals drawn above zero (%v), want the closed cohort's and the pooled reactivation at least", bars, err)
	}
	for sel, want := range map[string]string{
		"[data-timing-verdict]": "the user's hour brings more users back",
		"[data-timing-need]":    "more needed",
	} {
		got, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("%s: %q (%v), want %q", sel, got, err, want)
		}
	}
	browsertest.Run(t, ctx, chromedp.ScrollIntoView("#timing"))
	browsertest.Shot(t, ctx, "timing.png")
	browsertest.RequireNoErrors(t, ctx)
}
