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

// liftHistory logs three cohorts of goodbyes as the daily job with
// --holdout-percent 10 and two copy variants would (as of historyAsOf,
// the overview's 8 weeks starting 2026-01-12): 3,000 in the week of
// 01-12, 3,000 in the week of 01-19, 500 in the week of 02-23 (still
// counting). Of every 10 users, 1 is held out (20 % of them write again
// within 3 days), the others get variant a (25 % write again) or b
// (40 %): treated 33.3 % in all.
func liftHistory(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	for c, cohort := range []struct {
		at time.Time
		n  int
	}{{time.Date(2026, 1, 13, 6, 0, 0, 0, time.UTC), 3000}, {time.Date(2026, 1, 20, 6, 0, 0, 0, time.UTC), 3000},
		{time.Date(2026, 2, 24, 6, 0, 0, 0, time.UTC), 500}} {
		var goodbyes, back []fixture.LoggedMove
		for i := 1; i <= cohort.n; i++ {
			user, at := fixture.NamedID(fmt.Sprintf("lift%d:%d", c, i)), cohort.at.AddDate(0, 0, i%5)
			variant := map[bool]string{true: "a", false: "b"}[i%2 == 0]
			if i%10 == 0 {
				variant = ""
			}
			goodbyes = append(goodbyes, fixture.LoggedMove{User: user, From: "active", To: "goodbye_sent", Trigger: "inactivity_14d",
				Holdout: i%10 == 0, Variant: variant, At: at})
			if i%50 == 0 || i%10 == 1 || i%10 == 2 || i%10 == 3 {
				back = append(back, fixture.LoggedMove{User: user, From: "goodbye_sent", To: "active", Trigger: "user_message", At: at.AddDate(0, 0, 3)})
			}
		}
		fixture.LogMoves(t, pool, goodbyes)
		fixture.LogMoves(t, pool, back)
	}
	return pool
}

// Issue 45: the overview compares the arms (JSON and page), and the queue
// page's spend counts the goodbyes the holdout did not send.
func TestOverviewShowsTheLift(t *testing.T) {
	t.Parallel()
	pool := liftHistory(t)
	srv := serve(t, pool, historyAsOf)

	_, body := get(t, srv, "/", viewer, viewerPassword, true)
	var o console.Overview
	decode(t, body, &o)
	if o.Lift == nil || len(o.Lift.Cohorts) != 3 {
		t.Fatalf("the overview's lift: %+v, want three cohorts", o.Lift)
	}
	l := o.Lift
	if l.PooledCohorts != 2 || l.Treatment.Users != 5400 || l.Treatment.Reactivated != 1800 || l.Holdout.Users != 600 ||
		l.Holdout.Reactivated != 120 || !l.Cohorts[2].StillCounting || !strings.HasPrefix(l.Lift.Verdict, "the goodbye brings users back") {
		t.Errorf("pooled: %d cohorts, treated %+v, held out %+v, verdict %q; want 2, 1800/5400, 120/600, the goodbye bringing users back",
			l.PooledCohorts, l.Treatment, l.Holdout, l.Lift.Verdict)
	}
	if len(l.Variants) != 2 || l.Variants[0].Name != "a" || l.Variants[0].Reactivated != 600 || l.Variants[1].Reactivated != 1200 {
		t.Errorf("pooled variants %+v, want a 600/2400 and b 1200/3000", l.Variants)
	}

	_, page := get(t, srv, "/", viewer, viewerPassword, false)
	for _, want := range []string{"Is the goodbye worth it?", "the goodbye brings users back: &#43;13.3 points", "variant a", "variant b",
		"pooled, 2 weeks", `<svg class="ci"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the overview does not show %q", want)
		}
	}

	_, body = get(t, srv, "/queue", viewer, viewerPassword, true)
	var q console.Queue
	decode(t, body, &q)
	// The spend's window is the 30 days to historyAsOf: the third cohort's
	// 50 held-out users.
	if q.Spend.HeldOut.Goodbyes != 50 || q.Spend.HeldOut.USD == nil || *q.Spend.HeldOut.USD <= 0 {
		t.Errorf("the queue page's held-out goodbyes: %+v, want 50 priced", q.Spend.HeldOut)
	}
}

// Issue 45, in Chromium: the overview's arms, the interval bars and the
// verdict, and the held-out card of the queue page's spend; screenshots
// lift.png and spend-held-out.png.
func TestLiftInTheBrowser(t *testing.T) {
	t.Parallel()
	pool := liftHistory(t)
	srv := serve(t, pool, historyAsOf)
	ctx := browse(t, viewer, viewerPassword)

	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/#lift"), chromedp.WaitVisible("table.lift"))
	chartsDrawn(t, ctx)
	text, err := chromedp.Run(ctx, chromedp.Text("table.lift"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"held out", "95 % interval", "Mon 2026-02-23*", "pooled, 2 weeks", "+13.3", "variant b"} {
		if !strings.Contains(text, want) {
			t.Errorf("the lift table does not show %q: %s", want, text)
		}
	}
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('table.lift svg.ci rect.ci-up').length`))
	if err != nil || bars < 3 {
		t.Errorf("%d intervals drawn above zero (%v), want the closed cohorts', the pooled one and the variants'", bars, err)
	}
	verdict, err := chromedp.Run(ctx, chromedp.Text("[data-verdict]"))
	if err != nil || !strings.HasPrefix(verdict, "the goodbye brings users back") {
		t.Errorf("the verdict: %q (%v)", verdict, err)
	}
	browsertest.Run(t, ctx, chromedp.ScrollIntoView("#lift"))
	browsertest.Shot(t, ctx, "lift.png")
	browsertest.RequireNoErrors(t, ctx)

	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/queue#spend"), chromedp.WaitVisible("#held-out"))
	card, err := chromedp.Run(ctx, chromedp.Text("#held-out"))
	if err != nil || !strings.Contains(card, "50 goodbyes not sent to the control group") {
		t.Errorf("the held-out card: %q (%v)", card, err)
	}
	browsertest.Shot(t, ctx, "spend-held-out.png")
	browsertest.RequireNoErrors(t, ctx)
}
