package console_test

import (
	"cmp"
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// opsDB is a fresh migrated database, through the pool the console binary
// opens (pgtest.NewPool is internal/postgres.Open).
func opsDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	return pool
}

// opsAsOf is the pages' now in these tests.
var opsAsOf = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// failedMessage is a failed message for seedFailed: its error, and when it
// failed (its last due time; it has no ledger row).
type failedMessage struct {
	err    string
	failed time.Time
	kind   string
}

// seedFailed adds failed messages for one new user; their ids.
func seedFailed(t *testing.T, pool *pgxpool.Pool, msgs ...failedMessage) []string {
	t.Helper()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: opsAsOf.Add(-20 * 24 * time.Hour)})
	var ids []string
	for _, m := range msgs {
		// No err: no error text at all (NULL).
		ids = append(ids, fixture.Queue(t, pool, fixture.Message{User: user, Type: cmp.Or(m.kind, "goodbye"), CatalogKey: "engagement.goodbye",
			JID: "5511900000000@s.whatsapp.net", ScheduledFor: m.failed, Status: "failed", RetryCount: 3, Error: m.err, CreatedAt: m.failed}))
	}
	return ids
}

// opsPage gets path as HTML, as the operator.
func opsPage(t *testing.T, srv *httptest.Server, path string) string {
	t.Helper()
	resp, body := get(t, srv, path, operator, operatorPassword, false)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, body)
	}
	return body
}

var (
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]+)"[^>]*>(.*?)</form>`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// browserForm is what a browser submits for a form of a page: the form
// whose HTML contains marker, its hidden fields' values as the HTML parser
// reads them (character references decoded) and as form submission sends
// them (every line break normalised to CR LF, HTML's "normalize line
// breaks" step), and extra fields as a user fills them in. It returns the
// form's action and fields.
func browserForm(t *testing.T, body, marker string, extra url.Values) (string, url.Values) {
	t.Helper()
	at := strings.Index(body, marker)
	if at < 0 {
		t.Fatalf("no %q on the page", marker)
	}
	// The form the marker is in, or else the first after it (a row's
	// button after the row's reason).
	if open := strings.LastIndex(body[:at], "<form"); open >= 0 && strings.Index(body[open:], "</form>") > at-open {
		at = open
	}
	if m := formRE.FindStringSubmatch(body[at:]); m != nil {
		form := url.Values{}
		for _, in := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			form.Add(html.UnescapeString(in[1]), crlf(html.UnescapeString(in[2])))
		}
		for k, v := range extra {
			form[k] = v
		}
		return html.UnescapeString(m[1]), form
	}
	t.Fatalf("no form with %q on the page", marker)
	return "", nil
}

// crlf normalises line breaks as a browser's form submission does: a CR
// not followed by LF, and an LF not preceded by CR, become CR LF.
func crlf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\r' && (i+1 == len(s) || s[i+1] != '\n'):
			b.WriteString("\r\n")
		case s[i] == '\n' && (i == 0 || s[i-1] != '\r'):
			b.WriteString("\r\n")
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// submit posts a form as a browser does (no Accept: application/json): the
// status and the page.
func submit(t *testing.T, srv *httptest.Server, action string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+action, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.SetBasicAuth(operator, operatorPassword)
	resp, body := do(t, srv, req)
	return resp.StatusCode, body
}

// Issue 41, finding 4: a 3,525-message "502 Bad Gateway" group whose error
// text has a newline could not be requeued: the browser sent the reason
// back with CR LF, and the server compared it exactly (0 matches). The
// group's form round trip now leaves it intact.
func TestRequeueAGroupWhoseReasonHasANewline(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	reason := "webhook: HTTP 502 (transient): <html>\n<head><title>502 Bad Gateway</title></head>\r\n</html>\n"
	var msgs []failedMessage
	for i := range 7 {
		msgs = append(msgs, failedMessage{err: reason, failed: opsAsOf.Add(-time.Duration(i+1) * time.Hour)})
	}
	seedFailed(t, pool, msgs...)
	seedFailed(t, pool, failedMessage{err: "webhook: HTTP 500 (transient)", failed: opsAsOf.Add(-time.Hour)})

	action, form := browserForm(t, opsPage(t, srv, "/queue"), "502 Bad Gateway", nil)
	code, preview := submit(t, srv, action, form)
	if code != http.StatusOK || !strings.Contains(preview, "Requeue <strong>7</strong> messages") {
		t.Fatalf("the group's Requeue…: %d, %.600s; want a preview of 7 messages", code, preview)
	}
	action, form = browserForm(t, preview, `id="confirm"`, nil)
	if code, done := submit(t, srv, action, form); code != http.StatusOK || !strings.Contains(done, "Requeued 7 messages") {
		t.Fatalf("confirm: %d %.600s; want 7 requeued", code, done)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "failed"}); n != 1 {
		t.Errorf("after the requeue %d failed, want the other group's 1", n)
	}
	if filter, _ := fixture.FirstAudit(t, pool).Filter["error_group"].(string); filter != reason {
		t.Errorf("the audit row's reason is %q, want the group's own %q", filter, reason)
	}
}

// A group without an error text has no Requeue…: an empty reason would be
// no filter at all, and requeue every failed message.
func TestAnEmptyReasonIsNotEveryReason(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	seedFailed(t, pool, failedMessage{failed: opsAsOf.Add(-time.Hour)}, failedMessage{err: "x", failed: opsAsOf.Add(-time.Hour)})
	token := csrfToken(t, srv, operator, operatorPassword)
	for _, form := range []url.Values{
		{"csrf": {token}, "status": {"failed"}, "error_group_key": {""}},
		{"csrf": {token}, "status": {"failed"}, "error_group": {""}},
	} {
		resp, body := post(t, srv, "/actions/requeue/confirm", operator, operatorPassword, form)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "reason is empty") {
			t.Errorf("requeue of the empty reason (%v): %d %s, want 400", form, resp.StatusCode, body)
		}
	}
	if strings.Contains(opsPage(t, srv, "/queue"), `name="error_group_key" value=""`) {
		t.Errorf("the queue page offers Requeue… for the group without an error text")
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "failed"}); n != 2 {
		t.Errorf("%d failed left, want 2: nothing requeued", n)
	}
}

// Issue 41, finding 5: invalid UTF-8 or a NUL byte in a form field was a
// 500 (PostgreSQL refused the text); it is a 400 saying what is wrong.
func TestAFormFieldThatIsNotTextIs400(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	token := csrfToken(t, srv, operator, operatorPassword)
	for _, c := range []struct {
		path, field, value, want string
	}{
		{"/actions/requeue/preview", "kind", "good\xffbye", "not valid UTF-8"},
		{"/actions/requeue/confirm", "error_group", "HTTP 502\x00", "NUL byte"},
		{"/actions/cancel/preview", "kind", "\x00", "NUL byte"},
		{"/actions/cancel/confirm", "user_id", "\xc3\x28", "not valid UTF-8"},
	} {
		form := url.Values{"csrf": {token}, "status": {"failed"}, c.field: {c.value}}
		resp, body := post(t, srv, c.path, operator, operatorPassword, form)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.want) || !strings.Contains(body, c.field) {
			t.Errorf("POST %s with %s=%q: %d %s; want 400 saying %q of %s", c.path, c.field, c.value, resp.StatusCode, body, c.want, c.field)
		}
	}
	resp, body := get(t, srv, "/users?id="+url.QueryEscape("\x00"), operator, operatorPassword, false)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /users with a NUL: %d %.200s, want 400", resp.StatusCode, body)
	}
}

// Issue 41, point 6: a bad filter's message named engagementctl's flags
// (--user-id, --ids) to an operator who filled in a form without them.
func TestFormErrorsSpeakTheFormsTerms(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	token := csrfToken(t, srv, operator, operatorPassword)
	for _, c := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/actions/cancel/preview", url.Values{"user_id": {"bob"}}, `user id \"bob\" is not a UUID`},
		{"/actions/cancel/preview", url.Values{"ids": {"42"}}, `message ids: \"42\" is not a UUID`},
		{"/actions/requeue/preview", url.Values{"ids": {"42"}}, `message ids: \"42\" is not a UUID`},
		{"/actions/requeue/preview", url.Values{"status": {"sent"}}, `status must be failed or cancelled`},
		{"/actions/cancel/preview", url.Values{}, "fill in at least one of kind, user id or message ids"},
		{"/actions/cancel/preview", url.Values{"all": {"true"}, "kind": {"goodbye"}}, "all cancels every pending message; it cannot be combined with message ids, user id, kind or idempotency key"},
	} {
		c.form.Set("csrf", token)
		resp, body := post(t, srv, c.path, operator, operatorPassword, c.form)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.want) || strings.Contains(body, "--") {
			t.Errorf("POST %s %v: %d %s; want 400 saying %s, and no CLI flag", c.path, c.form, resp.StatusCode, body, c.want)
		}
	}
}

// Issue 41, finding 5: bidi override characters in data spoofed the text
// around them (a masked JID read "6000••••"). No bidi control reaches a
// page: each shows as its name.
func TestBidiControlsInDataShowAsTheirNames(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: opsAsOf.Add(-time.Hour),
		WhatsAppJID: fixture.Ptr("5511\u202e9876\u202c0006@s.whatsapp.net")})
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye", JID: "5511900000000@s.whatsapp.net",
		ScheduledFor: opsAsOf.Add(-time.Hour), Status: "failed", Error: "for \u202e6000 ••••"})
	seedFailed(t, pool, failedMessage{err: "webhook: HTTP 500 (transient) \u2067ltr\u2069 \u202d6000\u202c", failed: opsAsOf.Add(-time.Hour),
		kind: "good\u202ebye"})
	fixture.RecordRun(t, pool, fixture.RunRecord{Job: "engagement-daily", AsOf: opsAsOf.Add(-2 * time.Hour), Status: "failed",
		Error: "boom \u2066x", FinishedAt: opsAsOf.Add(-2 * time.Hour)})
	for _, path := range []string{"/", "/queue", "/runs", "/users?id=" + user} {
		body := opsPage(t, srv, path)
		if i := strings.IndexFunc(body, func(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) }); i >= 0 {
			t.Errorf("GET %s holds a bidi control: %q", path, body[max(0, i-60):min(len(body), i+60)])
		}
	}
	if body := opsPage(t, srv, "/queue"); !strings.Contains(body, "[U+202D]6000[U+202C]") || !strings.Contains(body, "good[U+202E]bye") {
		t.Errorf("the queue page does not name the reason's and kind's bidi controls")
	}
	// JSON keeps the data as it is.
	var q console.Queue
	_, body := get(t, srv, "/queue", operator, operatorPassword, true)
	decode(t, body, &q)
	if len(q.Failures) != 2 || !strings.Contains(q.Failures[0].Reason+q.Failures[1].Reason, "\u202d6000") {
		t.Errorf("the queue's JSON: %+v, want the reason as stored", q.Failures)
	}
}

// Issue 41, point 6: failure groups had totals since the first failure
// only, and permanent rejections were offered Requeue… like transient ones.
// A group now says how many failed in the last 24 h and the 24 h before,
// and how many its transport called permanent; requeuing those needs a
// second confirmation that the server checks.
func TestFailureGroupsCountTheLastDayAndMarkPermanentOnes(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	var msgs []failedMessage
	for _, h := range []int{1, 2, 30, 40, 47, 200} { // 2 in the last 24 h, 3 in the day before, 1 older
		msgs = append(msgs, failedMessage{err: "webhook: HTTP 410 (permanent)", failed: opsAsOf.Add(-time.Duration(h) * time.Hour)})
	}
	for _, h := range []int{1, 3, 5, 26} { // 3 and 1
		msgs = append(msgs, failedMessage{err: "webhook: HTTP 502 (transient)", failed: opsAsOf.Add(-time.Duration(h) * time.Hour)})
	}
	// One whose last attempt (the send ledger) was an hour ago, though it
	// was due three days ago: it failed in the last 24 h.
	late := seedFailed(t, pool, failedMessage{err: "whatsapp: error 131026 (permanent), HTTP 400", failed: opsAsOf.Add(-72 * time.Hour)})
	fixture.Ledger(t, pool, fixture.LedgerRow{Message: late[0], Transport: "whatsapp", Status: "failed",
		FirstAttempt: opsAsOf.Add(-time.Hour), LastAttempt: opsAsOf.Add(-time.Hour)})
	seedFailed(t, pool, msgs...)

	var q console.Queue
	_, body := get(t, srv, "/queue", operator, operatorPassword, true)
	decode(t, body, &q)
	type row struct {
		messages, lastDay, dayBefore, permanent int64
		trend                                   string
	}
	got := map[string]row{}
	for _, g := range q.Failures {
		got[g.Reason] = row{g.Messages, g.LastDay, g.DayBefore, g.Permanent, g.Trend()}
	}
	want := map[string]row{
		"webhook: HTTP 410 (permanent)":                {6, 2, 3, 6, "down"},
		"webhook: HTTP 502 (transient)":                {4, 3, 1, 0, "up"},
		"whatsapp: error 131026 (permanent), HTTP 400": {1, 1, 0, 1, "up"},
	}
	for reason, w := range want {
		if got[reason] != w {
			t.Errorf("group %q: %+v, want %+v", reason, got[reason], w)
		}
	}
	if q.FailedLastDay != 6 {
		t.Errorf("failed in the last 24 h over every group: %d, want 6", q.FailedLastDay)
	}
	queue := opsPage(t, srv, "/queue")
	if !strings.Contains(queue, `<span class="tag permanent"`) || strings.Count(queue, `<tr class="permanent">`) != 2 {
		t.Errorf("the queue page does not mark the two permanent groups")
	}

	// The permanent group's Requeue…: the preview warns and asks for the
	// checkbox; a confirmation without it is refused and changes nothing.
	action, form := browserForm(t, queue, "HTTP 410", nil)
	code, preview := submit(t, srv, action, form)
	if code != http.StatusOK || !strings.Contains(preview, `id="permanent-warning"`) ||
		!strings.Contains(preview, `name="requeue_permanent" value="yes" required`) {
		t.Fatalf("the permanent group's preview: %d %.800s; want the warning and a required checkbox", code, preview)
	}
	action, form = browserForm(t, preview, `id="confirm"`, nil)
	if code, body := submit(t, srv, action, form); code != http.StatusBadRequest || !strings.Contains(body, "failed permanently") {
		t.Errorf("confirm without the checkbox: %d %.300s; want 400", code, body)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "failed"}); n != 11 {
		t.Fatalf("after a refused confirmation %d failed, want 11", n)
	}
	form.Set("requeue_permanent", "yes")
	if code, body := submit(t, srv, action, form); code != http.StatusOK || !strings.Contains(body, "Requeued 6 messages") {
		t.Errorf("confirm with the checkbox: %d %.300s; want 6 requeued", code, body)
	}
	if ack := fixture.FirstAudit(t, pool).Filter["requeue_permanent"]; ack != true {
		t.Errorf("the audit row does not record the acknowledgement: %v", ack)
	}

	// A transient group needs no second confirmation.
	action, form = browserForm(t, opsPage(t, srv, "/queue"), "HTTP 502", nil)
	_, preview = submit(t, srv, action, form)
	if strings.Contains(preview, "requeue_permanent") {
		t.Errorf("the transient group's preview asks about permanent failures")
	}
	action, form = browserForm(t, preview, `id="confirm"`, nil)
	if code, body := submit(t, srv, action, form); code != http.StatusOK || !strings.Contains(body, "Requeued 4 messages") {
		t.Errorf("confirm the transient group: %d %.300s; want 4 requeued", code, body)
	}
}

// readSummarySources has a fresh console read the queue's and verify's
// first snapshots (the overview's summary shows their cards as being read
// until then; TestTheOverviewNeverWaitsForVerify).
func readSummarySources(t testing.TB, srv *httptest.Server) {
	t.Helper()
	for _, p := range []string{"/queue", "/verify"} {
		if resp, body := get(t, srv, p, viewer, viewerPassword, true); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %.300s", p, resp.StatusCode, body)
		}
	}
}

// Issue 41, point 6: the overview had no health summary (4,190 failed
// goodbyes, 420 waiting on the budget, a p95 send latency of 14 h and the
// verify result were on three other pages, and the latency card never
// turned red). The summary's cards are green, amber or red by the rule in
// their tooltips, from the queue and verify pages' own numbers and the
// jobs' latest runs.
func TestTheOverviewSaysWhatNeedsDoing(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	now := fixture.Now(t, pool).UTC().Truncate(time.Second)
	srv := serve(t, pool, now)
	seedUnhealthy(t, pool, now)
	readSummarySources(t, srv)

	var o console.Overview
	_, body := get(t, srv, "/", viewer, viewerPassword, true)
	decode(t, body, &o)
	cards := map[string]console.HealthCard{}
	for _, c := range o.Health.Cards {
		cards[c.Name] = c
	}
	for name, want := range map[string]struct{ level, value string }{
		"failed":                     {console.Red, "2"},
		"budget":                     {console.Amber, "1"},
		"latency":                    {console.Red, "7.0 h"},
		"run:engagement-daily":       {console.Red, "succeeded"},
		"run:engagement-weekly":      {console.Green, "succeeded"},
		"run:" + console.DeliveryJob: {console.Amber, "no run recorded"},
	} {
		if c := cards[name]; c.Level != want.level || c.Value != want.value || c.Rule == "" {
			t.Errorf("card %s: %+v, want %s %q with its rule", name, c, want.level, want.value)
		}
	}
	var v console.Verify
	_, body = get(t, srv, "/verify", viewer, viewerPassword, true)
	decode(t, body, &v)
	if c := cards["verify"]; (c.Level == console.Red) == v.OK || c.Level == "" {
		t.Errorf("the verify card is %s while verify says ok=%v", c.Level, v.OK)
	}

	home := opsPage(t, srv, "/")
	latencyCard := regexp.MustCompile(`<a class="card health-(\w+)" href="/queue" title="([^"]+)" data-health="latency">`).FindStringSubmatch(home)
	if latencyCard == nil || latencyCard[1] != "red" || !strings.Contains(html.UnescapeString(latencyCard[2]), "Red: either is over 6 h") {
		t.Errorf("the overview's latency card: %q, want red with its rule as the tooltip", latencyCard)
	}
	if !strings.Contains(home, "no run recorded") {
		t.Errorf("the overview does not say queue-process has no run recorded")
	}
	queue := opsPage(t, srv, "/queue")
	if !strings.Contains(queue, `<div class="card health-red" title="Green: the p95`) {
		t.Errorf("the queue page's latency card is not red")
	}

	// Once queue-process records its runs, the summary shows the latest.
	fixture.RecordRun(t, pool, fixture.RunRecord{Job: "queue-process", AsOf: now.Add(-10 * time.Minute), StartedAt: now.Add(-10 * time.Minute),
		FinishedAt: now.Add(-9 * time.Minute), Status: "succeeded"})
	_, body = get(t, serve(t, pool, now), "/", viewer, viewerPassword, true)
	decode(t, body, &o)
	for _, c := range o.Health.Cards {
		if c.Name == "run:"+console.DeliveryJob && (c.Level != console.Green || c.Value != "succeeded" || !strings.Contains(c.Detail, "10 min ago")) {
			t.Errorf("queue-process's card with a run 10 minutes ago: %+v, want green", c)
		}
	}
}

// seedUnhealthy makes a database whose overview is red and amber: 10
// messages sent an hour ago 7 h late, 2 permanent failures in the last
// 24 h, one message waiting on the send budget, a daily run 30 h ago, a
// weekly run 2 days ago and no queue-process run.
func seedUnhealthy(t *testing.T, pool *pgxpool.Pool, now time.Time) {
	t.Helper()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-20 * 24 * time.Hour)})
	const jid = "5511900000000@s.whatsapp.net"
	for range 10 {
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review", JID: jid,
			ScheduledFor: now.Add(-8 * time.Hour), SentAt: now.Add(-time.Hour), Status: "sent"})
	}
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "reminder", CatalogKey: "engagement.reminder", JID: jid,
		ScheduledFor: now.Add(24 * time.Hour), Status: "pending", DeferredReason: "budget"})
	seedFailed(t, pool, failedMessage{err: "webhook: HTTP 410 (permanent)", failed: now.Add(-2 * time.Hour)},
		failedMessage{err: "webhook: HTTP 410 (permanent)", failed: now.Add(-3 * time.Hour)})
	fixture.RecordRun(t, pool, fixture.RunRecord{Job: "engagement-daily", AsOf: now.Add(-30 * time.Hour), StartedAt: now.Add(-30 * time.Hour),
		FinishedAt: now.Add(-29 * time.Hour), Status: "succeeded"})
	fixture.RecordRun(t, pool, fixture.RunRecord{Job: "engagement-weekly", AsOf: now.Add(-48 * time.Hour), StartedAt: now.Add(-48 * time.Hour),
		FinishedAt: now.Add(-47 * time.Hour), Status: "succeeded"})
}

// TestTheOverviewNeverWaitsForVerify: the overview's summary shows the
// verify and queue pages' numbers, but a fresh console's overview does not
// wait for their first snapshots (at a million users verify's took 100 s
// on a busy machine, and the overview with it): its cards say they are
// being read, and show the numbers once those snapshots exist. verify is
// held here by a lock on a table only it reads, taken by another
// connection.
func TestTheOverviewNeverWaitsForVerify(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	now := fixture.Now(t, pool).UTC().Truncate(time.Second)
	srv := serve(t, pool, now)
	ctx := context.Background()
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx) //nolint:errcheck // released below, or at the end
	fixture.ConsoleLockAdopted(t, hold)

	card := func() console.HealthCard {
		t.Helper()
		var o console.Overview
		resp, body := get(t, srv, "/", viewer, viewerPassword, true)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /: %d %.300s", resp.StatusCode, body)
		}
		decode(t, body, &o)
		for _, c := range o.Health.Cards {
			if c.Name == "verify" {
				return c
			}
		}
		t.Fatal("no verify card")
		return console.HealthCard{}
	}
	if c := card(); c.Level != console.Reading || c.Value != "reading…" {
		t.Errorf("verify's first snapshot held, the verify card is %+v, want it being read", c)
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	readSummarySources(t, srv) // waits for the snapshots under way
	if c := card(); c.Level == console.Reading || !strings.HasPrefix(c.Value, "all ") {
		t.Errorf("once verify's snapshot exists, the verify card is %+v, want its result", c)
	}
}
