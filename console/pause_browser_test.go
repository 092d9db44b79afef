package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 58: when the bot answers that WhatsApp refuses its whole account
// (here: logged out), queue-process pauses the webhook transport; the
// overview's summary and the queue page show the pause as a red card that
// says what to do (re-link the device, then clear the pause), and the
// queue page's JSON carries it. Before, nothing on the console said so.
func TestAnAccountPauseIsRedWithWhatToDoInTheBrowser(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.DueReviews(t, pool, 3, "pause-")
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"account_error":"logged_out"}`)
	}))
	t.Cleanup(bot.Close)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL)
	if res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0", "--output", "json"); res.Code != 0 ||
		!strings.Contains(res.Stdout, `"stopped":"account_paused"`) {
		t.Fatalf("queue-process: exit %d, %s; want stopped account_paused", res.Code, res.Stdout)
	}
	srv := serve(t, pool, fixture.Now(t, pool).UTC())

	var q struct {
		Pauses []struct {
			Transport, Kind, Advice string
			Active                  bool
		} `json:"pauses"`
	}
	_, body := get(t, srv, "/queue", operator, operatorPassword, true)
	decode(t, body, &q)
	if len(q.Pauses) != 1 || q.Pauses[0].Transport != "webhook" || q.Pauses[0].Kind != "logged_out" || !q.Pauses[0].Active {
		t.Errorf("the queue page's pauses %+v; want the webhook's logged_out pause, active", q.Pauses)
	}
	readSummarySources(t, srv)

	ctx := browse(t, operator, operatorPassword)
	for _, page := range []struct{ path, card, shot string }{
		{"/", "#health [data-health='pause:webhook']", "overview-pause.png"},
		{"/queue", "#pauses [data-health='pause:webhook']", "queue-pause.png"},
	} {
		browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+page.path), chromedp.WaitVisible("footer"))
		card, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
			const c = document.querySelector("`+page.card+`");
			return c ? c.className + '|' + c.textContent : '';
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(card, "health-red") || !strings.Contains(card, "logged_out") ||
			!strings.Contains(card, "re-link the bot's device") || !strings.Contains(card, "engagementctl pause clear") {
			t.Errorf("%s: the pause's card is %q; want it red, naming logged_out and saying to re-link the device and clear the pause", page.path, card)
		}
		browsertest.Shot(t, ctx, page.shot)
	}
	browsertest.RequireNoErrors(t, ctx)
}

// An operator clears the pause from the queue page, once its cause is
// gone: Clear… shows what it ends, the confirmation clears it (audited),
// and the card is gone; engagementctl pause clear does the same. A viewer
// has no button.
func TestAnOperatorClearsThePauseInTheBrowser(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	fixture.PauseTransport(t, pool, "webhook", "banned", 403, "test")
	srv := serve(t, pool, fixture.Now(t, pool).UTC())

	if _, body := get(t, srv, "/queue", viewer, viewerPassword, false); strings.Contains(body, "/actions/clear_pause/") {
		t.Errorf("a viewer's queue page offers to clear the pause")
	}
	ctx := browse(t, operator, operatorPassword)
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/queue"), chromedp.WaitVisible("#pauses button"),
		chromedp.Click("#pauses button"), chromedp.WaitVisible("form#confirm"))
	lead, err := chromedp.Run(ctx, chromedp.Text("main"))
	if err != nil || !strings.Contains(lead, "webhook") || !strings.Contains(lead, "banned") {
		t.Errorf("the preview says %q (%v); want the webhook's banned pause named", lead, err)
	}
	pauses := func(keep func(fixture.TransportPause) bool) int {
		return fixture.CountWhere(fixture.TransportPauses(t, pool), keep)
	}
	if n := pauses(func(p fixture.TransportPause) bool { return p.ClearedAt == nil }); n != 1 {
		t.Errorf("the preview cleared the pause (%d active); want it active until confirmed", n)
	}
	browsertest.Run(t, ctx, chromedp.Click("form#confirm button"), chromedp.WaitVisible("#done"))
	if n := pauses(func(p fixture.TransportPause) bool { return p.ClearedAt != nil && fixture.Is(p.ClearedBy, operator) }); n != 1 {
		t.Errorf("%d pauses cleared by %s; want the one", n, operator)
	}
	if n := fixture.Audits(t, pool, func(e fixture.AuditEntry) bool { return e.Action == "clear_pause" && e.Actor == operator }); n != 1 {
		t.Errorf("%d audit rows of the clear; want 1", n)
	}
	browsertest.RequireNoErrors(t, ctx)
}
