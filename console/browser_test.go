package console_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/seeded"
)

// browse opens a Chromium tab signed in as user (Basic auth on every
// request of the tab).
func browse(t *testing.T, user, password string) context.Context {
	t.Helper()
	ctx := browsertest.New(t)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	browsertest.Run(t, ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"Authorization": auth},
		})
		return err
	}))
	return ctx
}

// chartsDrawn waits until every chart of the page has been drawn by uPlot
// (console.js marks each data-drawn="true" once its canvas is made) and
// returns how many there are.
func chartsDrawn(t *testing.T, ctx context.Context) int {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, browsertest.Timeout)
	defer cancel()
	_, err := chromedp.Run(tctx, chromedp.Poll[bool](`(() => {
		const all = document.querySelectorAll('[data-chart]');
		return [...all].every(el => el.dataset.drawn === 'true' && el.querySelector('canvas'));
	})()`))
	if err != nil {
		failed, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('[data-chart]')].map(e => e.id + ':' + e.dataset.drawn).join(' ')`))
		t.Fatalf("charts not drawn (%s): %v; page errors: %v", failed, err, browsertest.Errors(ctx))
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-chart] canvas').length`))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEveryPageInTheBrowser(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	// A send budget, full, with a line waiting on it: the queue page's
	// panel and the forecast's backlog show it (the reminders go to users
	// whose pages are not shown).
	seedBudget(t, h.pool, []string{h.u["u3"], h.u["u4"], h.u["u8"], h.u["u9"]})
	user := h.u["u1"]
	// The user said stop an hour ago; a resume they said two hours ago
	// arrived after it (Meta resends late): the user page shows it
	// superseded (issue 56).
	now := fixture.Now(t, h.pool)
	fixture.SetConsent(t, h.pool, fixture.ConsentChange{User: user, OptedOut: true, Source: "bot:keyword", At: now.Add(-time.Hour)})
	fixture.SetConsent(t, h.pool, fixture.ConsentChange{User: user, OptedOut: false, Source: "meta:user_preferences", At: now.Add(-2 * time.Hour)})
	srv := serve(t, h.pool, historyAsOf)
	ctx := browse(t, operator, operatorPassword)
	for _, p := range []struct {
		name, path string
		charts     int
		shows      []string
	}{
		{"overview", "/", 3, []string{"Goodbye funnel by weekly cohort", "accepted", "failed late"}},
		{"queue", "/queue", 1, []string{"webhook: receiver answered 500", "10 / 10", "the last waiting message goes at",
			"What WhatsApp said", "131049", "Meta's limit on marketing messages",
			"Spend, last 30 days", "Meta's category", "marketing", "at the prices as of 2026-01-01"}},
		{"runs", "/runs", 2, []string{"engagement-daily"}},
		{"verify", "/verify", 0, []string{"log_matches_state"}},
		{"user", "/users?id=" + user, 0, []string{"Timeline", "(superseded: changed nothing)"}},
		{"forecast", "/forecast", 1, []string{"would do on each of the next 7 days", "time out three days after them",
			"25 messages wait on the send budget of webhook (10 a day): the last goes at",
			"What the next 7 days cost", "billed as marketing in BR"}},
		{"audit", "/audit", 0, []string{"No action yet."}},
	} {
		t.Run(p.name, func(t *testing.T) {
			browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+p.path), chromedp.WaitVisible("footer"))
			if got := chartsDrawn(t, ctx); got != p.charts {
				t.Errorf("%s: %d charts drawn, want %d", p.path, got, p.charts)
			}
			text, err := chromedp.Run(ctx, chromedp.Text("main"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range p.shows {
				if !strings.Contains(text, want) {
					t.Errorf("%s does not show %q", p.path, want)
				}
			}
			if p.name != "runs" { // runs.png is TestRunsAndFunnelChartsInTheBrowser's: every job runs there
				browsertest.Shot(t, ctx, p.name+".png")
			}
			browsertest.RequireNoErrors(t, ctx)
		})
	}
}

func TestRequeueInTheBrowser(t *testing.T) {
	t.Parallel()
	pool := seededWithFailures(t)
	srv := serve(t, pool, seeded.AsOf)
	ctx := browse(t, operator, operatorPassword)

	// The first failure group's Requeue… button: the preview says 6.
	browsertest.Run(t, ctx,
		chromedp.Navigate(srv.URL+"/queue"),
		chromedp.WaitVisible("table.failures"),
		chromedp.Click(`table.failures tbody tr:first-child button`),
		chromedp.WaitVisible("form#confirm"),
	)
	lead, err := chromedp.Run(ctx, chromedp.Text("p.lead"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lead, "Requeue 6 messages") {
		t.Fatalf("the preview says %q, want 6 messages", lead)
	}
	browsertest.Shot(t, ctx, "requeue-preview.png")
	if failed := countFailed(t, pool); failed != 9 {
		t.Fatalf("after the preview %d failed, want 9: a preview changes nothing", failed)
	}

	browsertest.Run(t, ctx, chromedp.Click(`form#confirm button[type=submit]`), chromedp.WaitVisible("#done"))
	done, err := chromedp.Run(ctx, chromedp.Text("#done"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(done, "Requeued 6 messages") {
		t.Errorf("after the confirmation the page says %q", done)
	}
	browsertest.Shot(t, ctx, "requeue-done.png")
	audits := fixture.Audits(t, pool, func(e fixture.AuditEntry) bool {
		return e.Actor == operator && e.Action == "requeue" && e.Messages == 6
	})
	if failed := countFailed(t, pool); failed != 3 || audits != 1 {
		t.Errorf("after the requeue: %d failed (want 3), %d audit rows of ops' requeue of 6 (want 1)", failed, audits)
	}
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/audit"), chromedp.WaitVisible("table.audit"))
	row, err := chromedp.Run(ctx, chromedp.Text("table.audit tbody tr:first-child"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(row, operator) || !strings.Contains(row, "requeue") {
		t.Errorf("the audit page's first row is %q, want ops' requeue", row)
	}
	browsertest.Shot(t, ctx, "audit.png")
	browsertest.RequireNoErrors(t, ctx)
}

func TestAViewerSeesNoAction(t *testing.T) {
	t.Parallel()
	pool := seededWithFailures(t)
	srv := serve(t, pool, seeded.AsOf)
	ctx := browse(t, viewer, viewerPassword)
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/queue"), chromedp.WaitVisible("table.failures"))
	forms, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('form[method=post], button').length`))
	if err != nil {
		t.Fatal(err)
	}
	if forms != 0 {
		t.Errorf("a viewer's queue page has %d forms or buttons, want none", forms)
	}
	who, err := chromedp.Run(ctx, chromedp.Text(".who"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(who, "viewer") {
		t.Errorf("the header says %q, want viewer", who)
	}
	browsertest.Shot(t, ctx, "queue-viewer.png")
	browsertest.RequireNoErrors(t, ctx)
}

func TestAForgedPostIsRefused(t *testing.T) {
	t.Parallel()
	// A page on another origin that the signed-in operator opens posts a
	// requeue to the console on their behalf, with their credentials: the
	// console refuses it and nothing changes.
	pool := seededWithFailures(t)
	srv := serve(t, pool, seeded.AsOf)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/actions/requeue/confirm">
<input name="status" value="failed"><input name="csrf" value="guessed"></form>
<script>document.getElementById('f').submit()</script>`, srv.URL)
	}))
	defer evil.Close()
	ctx := browse(t, operator, operatorPassword)
	browsertest.ExpectStatus(ctx, "/actions/requeue/confirm", http.StatusForbidden)
	browsertest.Run(t, ctx, chromedp.Navigate(evil.URL), chromedp.WaitVisible("body"))
	tctx, cancel := context.WithTimeout(ctx, browsertest.Timeout)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](`location.pathname === '/actions/requeue/confirm' && document.readyState === 'complete'`)); err != nil {
		t.Fatalf("the forged form was not submitted: %v", err)
	}
	body, err := chromedp.Run(ctx, chromedp.Text("body"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "refused") {
		t.Errorf("the forged POST's answer is %q, want a refusal", body)
	}
	if failed := countFailed(t, pool); failed != 9 {
		t.Errorf("after the forged POST %d failed, want 9: nothing requeued", failed)
	}
}

func countFailed(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return fixture.CountMessages(t, pool, fixture.Messages{Status: "failed"})
}

// Issue 41: the overview's health summary, in Chromium; a failure group
// whose reason has newlines requeued from its button (finding 4: Chromium
// sends them back as CR LF); and a permanent group's requeue, which warns
// and needs its checkbox ticked.
func TestHealthAndPermanentRequeueInTheBrowser(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	now := fixture.Now(t, pool).UTC().Truncate(time.Second)
	seedUnhealthy(t, pool, now)
	reason := "webhook: HTTP 502 (transient): <html>\n<head><title>502 Bad Gateway</title></head>\n</html>"
	seedFailed(t, pool, failedMessage{err: reason, failed: now.Add(-time.Hour)}, failedMessage{err: reason, failed: now.Add(-30 * time.Hour)},
		failedMessage{err: reason, failed: now.Add(-26 * time.Hour)})
	srv := serve(t, pool, now)
	readSummarySources(t, srv)
	ctx := browse(t, operator, operatorPassword)

	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("#health"))
	levels, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#health [data-health]')]
		.map(c => c.dataset.health + '=' + c.className.replace('card health-', '') + (c.title.includes('Red:') ? '' : '(no rule)')).join(' ')`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"failed=red", "budget=amber", "latency=red", "run:engagement-daily=red",
		"run:engagement-weekly=green", "run:queue-process=amber"} {
		if !strings.Contains(" "+levels+" ", " "+want+" ") {
			t.Errorf("the summary's cards are %q, want %s with its rule as the tooltip", levels, want)
		}
	}
	browsertest.Shot(t, ctx, "overview-health.png")

	// The group's Requeue… button, in the row whose reason says text.
	clickGroup := func(text string) {
		t.Helper()
		browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/queue"), chromedp.WaitVisible("table.failures"))
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
			const tr = [...document.querySelectorAll('table.failures tbody tr')].find(tr => tr.textContent.includes(%q));
			tr.querySelector('button').click();
			return true;
		})()`, text))); err != nil {
			t.Fatal(err)
		}
		browsertest.Run(t, ctx, chromedp.WaitVisible("form#confirm"))
	}
	lead := func() string {
		t.Helper()
		text, err := chromedp.Run(ctx, chromedp.Text("p.lead"))
		if err != nil {
			t.Fatal(err)
		}
		return text
	}

	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/queue#failures"), chromedp.WaitVisible("table.failures"))
	browsertest.Shot(t, ctx, "queue-failures.png")

	clickGroup("502 Bad Gateway")
	if got := lead(); !strings.Contains(got, "Requeue 3 messages") {
		t.Fatalf("the newline group's preview says %q, want 3 messages", got)
	}
	browsertest.Run(t, ctx, chromedp.Click(`form#confirm button[type=submit]`), chromedp.WaitVisible("#done"))
	if got := lead(); !strings.Contains(got, "Requeued 3 messages") {
		t.Errorf("after confirming the newline group the page says %q", got)
	}

	clickGroup("HTTP 410")
	if got := lead(); !strings.Contains(got, "Requeue 2 messages") {
		t.Fatalf("the permanent group's preview says %q, want 2 messages", got)
	}
	warning, err := chromedp.Run(ctx, chromedp.Text("#permanent-warning"))
	if err != nil || !strings.Contains(warning, "2 of them failed permanently") {
		t.Fatalf("the permanent group's preview warns %q (%v)", warning, err)
	}
	browsertest.Shot(t, ctx, "requeue-permanent.png")
	// Unticked, the browser does not send the form.
	valid, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('form#confirm').checkValidity()`))
	if err != nil || valid {
		t.Errorf("the confirmation form without the checkbox is valid=%v (%v), want invalid", valid, err)
	}
	browsertest.Run(t, ctx, chromedp.Click(`form#confirm input[name=requeue_permanent]`),
		chromedp.Click(`form#confirm button[type=submit]`), chromedp.WaitVisible("#done"))
	if got := lead(); !strings.Contains(got, "Requeued 2 messages") {
		t.Errorf("after confirming the permanent group the page says %q", got)
	}
	if n := countFailed(t, pool); n != 0 {
		t.Errorf("%d failed left, want 0", n)
	}
	browsertest.RequireNoErrors(t, ctx)
}

// legendAndTicks reads a drawn chart's legend as the page shows it (the
// cursor off the chart) and its x axis's tick labels, drawn on the canvas.
func legendAndTicks(t *testing.T, ctx context.Context, id string) (legend string, ticks []string) {
	t.Helper()
	legend, err := chromedp.Run(ctx, chromedp.Text("#"+id+" .u-legend"))
	if err != nil {
		t.Fatal(err)
	}
	ticks, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`document.getElementById('`+id+`').uplot.axes[0]._values.map(String)`))
	if err != nil {
		t.Fatal(err)
	}
	return legend, ticks
}

// Issue 41, point 6, in Chromium: the runs page draws a line per job
// (queue-process's among them) on a 24-hour UTC axis; the funnel's ticks
// are the cohorts' Mondays and its open cohorts are dashed; every legend
// shows the latest values before anyone hovers.
func TestRunsAndFunnelChartsInTheBrowser(t *testing.T) {
	t.Parallel()
	pool, _ := runHistory(t)
	srv := serve(t, pool, runsAsOf)
	ctx := browse(t, viewer, viewerPassword)

	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/runs"), chromedp.WaitVisible("footer"))
	if got := chartsDrawn(t, ctx); got != 2 {
		t.Fatalf("/runs: %d charts drawn, want 2", got)
	}
	hour := regexp.MustCompile(`^(\d{2}:\d{2}|\d{2}-\d{2}|\d{4})(\n.*)?$`)
	for _, id := range []string{"chart-runs", "chart-runs-work"} {
		legend, ticks := legendAndTicks(t, ctx, id)
		for _, want := range []string{"engagement-daily", "engagement-weekly", "queue-process", "2026-03-03 18:00"} {
			if !strings.Contains(legend, want) {
				t.Errorf("%s's legend %q does not show %q", id, legend, want)
			}
		}
		if len(ticks) == 0 {
			t.Errorf("%s: no x tick", id)
		}
		for _, tick := range ticks {
			if !hour.MatchString(tick) {
				t.Errorf("%s: x tick %q, want 24-hour HH:MM or a day", id, tick)
			}
		}
	}
	// The work chart's legend, off the chart, says what each job's latest
	// run did: queue-process's last run sent nothing (the goodbyes went
	// the first morning).
	if legend, _ := legendAndTicks(t, ctx, "chart-runs-work"); !regexp.MustCompile(`queue-process\s*0`).MatchString(legend) {
		t.Errorf("the work chart's legend %q does not show queue-process's latest value", legend)
	}
	text, err := chromedp.Run(ctx, chromedp.Text("table.jobs"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "queue-process") || !strings.Contains(text, "2026-03-03 18:00 UTC (21 h 0 min ago)") {
		t.Errorf("each job's latest run: %q, want queue-process's at 2026-03-03 18:00, 21 h 0 min ago", text)
	}
	browsertest.Shot(t, ctx, "runs.png")
	browsertest.RequireNoErrors(t, ctx)

	h := newHistory(t)
	osrv := serve(t, h.pool, historyAsOf)
	octx := browse(t, viewer, viewerPassword)
	browsertest.Run(t, octx, chromedp.Navigate(osrv.URL+"/"), chromedp.WaitVisible("footer"))
	chartsDrawn(t, octx)
	legend, ticks := legendAndTicks(t, octx, "chart-funnel")
	var mondays []string
	for i := range console.Weeks {
		mondays = append(mondays, time.Date(2026, 1, 12+7*i, 0, 0, 0, 0, time.UTC).Format(time.DateOnly))
	}
	if strings.Join(ticks, " ") != strings.Join(mondays, " ") {
		t.Errorf("the funnel's x ticks %q, want the cohorts' Mondays %q", ticks, mondays)
	}
	// Off the chart the legend shows the latest cohort: this week's, empty
	// so far (cohort B, of 2026-02-23, is the one before).
	for _, want := range []string{"week of2026-03-02", "reactivated so far (30 d not over)0%", "waiting0"} {
		if !strings.Contains(strings.ReplaceAll(legend, "\n", ""), want) {
			t.Errorf("the funnel's legend %q does not show %q before a hover", legend, want)
		}
	}
	note, err := chromedp.Run(octx, chromedp.Text("#chart-funnel .chart-note"))
	if err != nil || !strings.Contains(note, "Dashed") {
		t.Errorf("the funnel's note: %q (%v), want what the dashed line means", note, err)
	}
	browsertest.Shot(t, octx, "funnel.png")
	browsertest.RequireNoErrors(t, octx)
}

// Issue 44: an operator opts a user out on their page, in Chromium: the
// button, the preview, the confirmation, and the history on the page.
func TestOptOutInTheBrowser(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: opsAsOf.Add(-20 * 24 * time.Hour)})
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.default",
		JID: "55@s.whatsapp.net", ScheduledFor: time.Now().Add(time.Hour), Key: user + ":g"})
	ctx := browse(t, operator, operatorPassword)
	browsertest.Run(t, ctx,
		chromedp.Navigate(srv.URL+"/users?id="+user),
		chromedp.WaitVisible("form#consent-form"),
		chromedp.Click(`form#consent-form button[type=submit]`),
		chromedp.WaitVisible("form#confirm"),
	)
	browsertest.Shot(t, ctx, "opt-out-preview.png")
	browsertest.Run(t, ctx, chromedp.Click(`form#confirm button[type=submit]`), chromedp.WaitVisible("#done"))
	done, err := chromedp.Run(ctx, chromedp.Text("#done"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(done, "Opted out; 1 pending message cancelled") {
		t.Errorf("after the confirmation the page says %q", done)
	}
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/users?id="+user), chromedp.WaitVisible("table.consent-history"))
	row, err := chromedp.Run(ctx, chromedp.Text("table.consent-history tbody tr:first-child"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(row, "opted out") || !strings.Contains(row, "console") || !strings.Contains(row, operator) {
		t.Errorf("the consent history's first row is %q, want ops' opt-out from the console", row)
	}
	browsertest.Shot(t, ctx, "opt-out-done.png")
	browsertest.RequireNoErrors(t, ctx)
}

// Issue 44: an operator erases a person in Chromium: the button, the
// preview of what changes, the confirmation.
func TestEraseInTheBrowser(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: opsAsOf.Add(-20 * 24 * time.Hour)})
	dayAgo := time.Now().Add(-24 * time.Hour)
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.default",
		JID: "5511987654321@s.whatsapp.net", ScheduledFor: dayAgo, Key: user + ":a", Status: "sent", SentAt: dayAgo})
	ctx := browse(t, operator, operatorPassword)
	browsertest.Run(t, ctx,
		chromedp.Navigate(srv.URL+"/users?id="+user),
		chromedp.WaitVisible("form#erase-form"),
		chromedp.Click(`form#erase-form button[type=submit]`),
		chromedp.WaitVisible("form#confirm"),
	)
	browsertest.Shot(t, ctx, "erase-preview.png")
	browsertest.Run(t, ctx, chromedp.Click(`form#confirm button[type=submit]`), chromedp.WaitVisible("#done"))
	done, err := chromedp.Run(ctx, chromedp.Text("#done"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(done, "Erased: 1 queued message scrubbed") {
		t.Errorf("after the confirmation the page says %q", done)
	}
	browsertest.Shot(t, ctx, "erase-done.png")
	if n := fixture.CountWhere(fixture.MessageRows(t, pool, fixture.Messages{Users: []string{user}}), func(m fixture.MessageRow) bool {
		return strings.Contains(m.DestinationJID, "987654321")
	}); n != 0 {
		t.Errorf("%d messages still hold the person's number", n)
	}
	browsertest.RequireNoErrors(t, ctx)
}
