package main_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 61, "the demo tells the whole story": after make demo and make
// console a newcomer saw red cards ("send latency: none sent", a
// "succeeded" queue-process in red: the demo sent at the real time, the
// console treated the simulated day 3 as now), an empty "sent per hour"
// chart, no receipts, no holdout and no lift. In Chromium, on the demo's
// console: no health card is red, every chart of the overview, the queue
// and the runs has a value that is not zero, the funnel has receipts and
// answers, and the lift compares a treated arm with a held-out one.
// Screenshots demo-overview.png, demo-queue.png and demo-runs.png
// (when CONSOLE_SCREENSHOTS names a folder: make screenshots).
func TestTheDemoTellsTheWholeStory(t *testing.T) {
	t.Parallel()
	server, err := pgtest.ServerURL(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bin := binaries(t, "engagement-daily", "engagement-weekly", "queue-process", "engagementctl", "engagement-console")
	const database = "engagement_demo_story_test"
	t.Cleanup(func() {
		if err := pgtest.DropDatabase(context.Background(), database); err != nil {
			t.Errorf("drop the demo's database: %v", err)
		}
	})
	demo := cmdtest.Build(t, "./internal/demo")
	env := append(os.Environ(), "TEST_DATABASE_URL="+server, "PGTEST_PROBE_URL=none")
	if res := cmdtest.Run(t, demo, env, "-bin", bin, "-database", database, "-users", "200"); res.Code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	base := start(t, ".", env, demo, "-bin", bin, "-console", freeAddr(t), "-database", database).consoleURL(t)

	ctx := browsertest.New(t)
	for _, page := range []struct{ path, shot string }{{"", "demo-overview.png"}, {"queue", "demo-queue.png"}, {"runs", "demo-runs.png"}} {
		browsertest.Run(t, ctx, chromedp.Navigate(base+page.path), chromedp.WaitVisible("main"))
		undrawn, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => {
			const left = [...document.querySelectorAll('[data-chart]')].filter(el => el.dataset.drawn !== 'true').map(el => el.id);
			return left.length === 0 ? 'drawn' : '';
		})()`))
		if err != nil || undrawn != "drawn" {
			t.Fatalf("/%s: the charts were not drawn (%v): %v", page.path, err, browsertest.Errors(ctx))
		}
		empty, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-chart]')]
			.filter(el => !JSON.parse(el.dataset.chart).series.some(s => (s.values || []).some(v => v)))
			.map(el => el.id)`))
		if err != nil || len(empty) > 0 {
			t.Errorf("/%s: charts without a value (%v): %v", page.path, err, empty)
		}
		red, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.health-red, .card.health-red')]
			.map(el => el.innerText.replace(/\s+/g, ' '))`))
		if err != nil || len(red) > 0 {
			t.Errorf("/%s: red cards (%v): %v", page.path, err, red)
		}
		browsertest.Shot(t, ctx, page.shot)
		browsertest.RequireNoErrors(t, ctx)
	}

	browsertest.Run(t, ctx, chromedp.Navigate(base), chromedp.WaitVisible("table.funnel"))
	funnel, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('table.funnel tbody tr')]
		.filter(tr => +tr.cells[1].innerText.replace(/\D/g, '') > 0)
		.map(tr => [...tr.cells].map(td => td.innerText.trim()).join('|'))`))
	if err != nil || len(funnel) == 0 {
		t.Fatalf("the funnel has no week of goodbyes (%v)", err)
	}
	// week|goodbyes|accepted|delivered|read|failed late|help|remind later|not now|came back|...
	day1 := strings.Split(funnel[0], "|")
	for i, what := range map[int]string{3: "delivered", 4: "read", 10: "timed out"} {
		if v := strings.TrimSpace(day1[i]); v == "0" || v == "—" {
			t.Errorf("the funnel's first week shows no %s: %s", what, funnel[0])
		}
	}
	// The answers are drawn from the user ids, 8 in 20 of the goodbyes
	// sent on day 1 (a third of the users or more are awake at any hour).
	if day1[6]+day1[7]+day1[8] == "000" {
		t.Errorf("the funnel's first week shows no answer: %s", funnel[0])
	}
	lift, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('table.lift:not(.timing) tbody tr')]
		.map(tr => [...tr.cells].map(td => td.innerText.trim()).join('|'))`))
	if err != nil || len(lift) == 0 {
		t.Fatalf("the lift table has no week (%v)", err)
	}
	// week|treated|reactivated|rate|held out|reactivated|rate|difference|interval
	if cells := strings.Split(lift[0], "|"); len(cells) < 9 || cells[1] == "0" || cells[4] == "0" || cells[7] == "—" {
		t.Errorf("the lift's week does not compare a treated and a held-out arm: %s", lift[0])
	}
	// Day 1 ran with --best-hour-percent 50: the card compares two arms
	// that both got goodbyes.
	timing, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('table.lift.timing tbody tr')]
		.map(tr => [...tr.cells].map(td => td.innerText.trim()).join('|'))`))
	if err != nil || len(timing) < 2 {
		t.Fatalf("the timing card has no week with both arms (%v): %v", err, timing)
	}
	if !strings.Contains(timing[0], "best hour") || !strings.Contains(timing[1], "run time") ||
		strings.Contains(timing[0], "|0|") || strings.Contains(timing[1], "|0|") {
		t.Errorf("the timing card's first week does not compare two arms with users: %v", timing[:2])
	}
}
