package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
)

// A snapshot page served while a newer snapshot is read says so by its
// title ("as of 14:02 UTC, refreshing…") and in its footer, which also
// says where the figures were read (here a replica URL that names the
// primary) and the pages' fixed now; once the refresh is done the mark
// goes.
func TestAStaleSnapshotInTheBrowser(t *testing.T) {
	t.Parallel()
	_, pool := consoleDatabase(t)
	clock := newTestClock(time.Date(2026, 3, 2, 14, 2, 0, 0, time.UTC))
	c, srv := serveSnapshots(t, console.Config{Pool: pool, Replica: pool, Clock: clock.Now})
	ctx := browse(t, operator, operatorPassword)

	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("footer"))
	foot := text("footer")
	for _, want := range []string{"Read from the replica at 2026-03-02 14:02 UTC", "is not a standby", "treat 2026-03-02 06:00 UTC as now (--as-of)"} {
		if !strings.Contains(foot, want) {
			t.Errorf("the fresh page's footer lacks %q: %s", want, foot)
		}
	}

	clock.Advance(2 * time.Minute) // older than MaxAge
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("#stale"))
	if got := text("h1"); !strings.Contains(got, "as of 14:02 UTC, refreshing…") {
		t.Errorf("the stale page's title is %q", got)
	}
	if foot := text("footer"); !strings.Contains(foot, "newer ones are being read in the background") {
		t.Errorf("the stale page's footer: %s", foot)
	}
	browsertest.Shot(t, ctx, "stale.png")

	if err := c.WaitRefreshed(context.Background(), "overview"); err != nil {
		t.Fatal(err)
	}
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("footer"))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#stale').length`)); err != nil || n != 0 {
		t.Errorf("after the refresh the page is still marked stale (%d, %v)", n, err)
	}
	if foot := text("footer"); !strings.Contains(foot, "at 2026-03-02 14:04 UTC") {
		t.Errorf("after the refresh the footer: %s", foot)
	}
	browsertest.RequireNoErrors(t, ctx)
}
