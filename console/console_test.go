package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/seeded"
)

var pages = []string{"/", "/queue", "/runs", "/verify", "/users", "/forecast", "/audit"}

func TestEveryRequestButHealthNeedsCredentials(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	// 18 failed logins from one address: over the limit on failures,
	// which TestFailedLoginsAreLimitedAndLogged tests.
	h, err := console.New(console.Config{Pool: pool, AsOf: func() time.Time { return seeded.AsOf },
		Auth: console.Auth{Users: htpasswd(t), Operators: []string{operator}, ClientLimit: noLimit, UserLimit: noLimit}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptestServer(t, h)

	for _, p := range append(pages, "/assets/console.js", "/nope") {
		resp, _ := get(t, srv, p, "", "", false)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", p, resp.StatusCode)
		}
		if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") {
			t.Errorf("GET %s: WWW-Authenticate %q, want a Basic challenge", p, got)
		}
		resp, _ = get(t, srv, p, operator, "wrong", false)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong password: %d, want 401", p, resp.StatusCode)
		}
		resp, _ = get(t, srv, p, "nobody", operatorPassword, false)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s as an unknown user: %d, want 401", p, resp.StatusCode)
		}
	}
	resp, _ := post(t, srv, "/actions/requeue/confirm", "", "", url.Values{"status": {"failed"}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without credentials: %d, want 401", resp.StatusCode)
	}
	resp, body := get(t, srv, "/healthz", "", "", false)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("GET /healthz without credentials: %d %q, want 200 ok", resp.StatusCode, body)
	}
}

func TestHealthzFailsWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	srv := serve(t, pool, seeded.AsOf)
	pool.Close()
	resp, _ := get(t, srv, "/healthz", "", "", false)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /healthz with the pool closed: %d, want 503", resp.StatusCode)
	}
}

func TestTrustedHeader(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	h, err := console.New(console.Config{Pool: pool, Auth: console.Auth{TrustedUserHeader: "X-Forwarded-Email",
		Operators: []string{"ana@example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptestServer(t, h)
	for _, tc := range []struct {
		header string
		code   int
		role   string
	}{{"", http.StatusUnauthorized, ""}, {"ana@example.com", http.StatusOK, "operator"}, {"bob@example.com", http.StatusOK, "viewer"}} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/audit", nil)
		if tc.header != "" {
			req.Header.Set("X-Forwarded-Email", tc.header)
		}
		resp, body := do(t, srv, req)
		if resp.StatusCode != tc.code {
			t.Errorf("X-Forwarded-Email %q: %d, want %d", tc.header, resp.StatusCode, tc.code)
		}
		if tc.role != "" && !strings.Contains(body, tc.header+" · "+tc.role) {
			t.Errorf("X-Forwarded-Email %q: the page does not say %q", tc.header, tc.role)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	srv := serve(t, pool, seeded.AsOf)
	resp, body := get(t, srv, "/", operator, operatorPassword, false)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %d %s", resp.StatusCode, body)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("Content-Security-Policy allows inline or eval'd scripts: %q", csp)
	}
	for h, want := range map[string]string{"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	// No inline script at all: every <script> has a src.
	for _, part := range strings.Split(body, "<script")[1:] {
		if !strings.HasPrefix(strings.TrimSpace(part), "src=") {
			t.Errorf("inline script on /: <script%.80s", part)
		}
	}
}

func TestEveryPageIsAlsoJSON(t *testing.T) {
	t.Parallel()
	pool := seededWithFailures(t)
	srv := serve(t, pool, seeded.AsOf)
	for _, p := range append(pages, "/users?id=00000000-0000-0000-0000-000000000000") {
		resp, body := get(t, srv, p, viewer, viewerPassword, true)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("GET %s as JSON: %d %s: %.200s", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		var v map[string]any
		decode(t, body, &v)
		resp, body = get(t, srv, p, viewer, viewerPassword, false)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s as HTML: %d %s: %.200s", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	var q console.Queue
	_, body := get(t, srv, "/queue", viewer, viewerPassword, true)
	decode(t, body, &q)
	if len(q.Failures) != 2 || q.Failures[0].Messages != 6 || q.Failures[0].Reason != failedGroups[0].group ||
		q.Failures[1].Messages != 3 || q.Failures[1].Reason != failedGroups[1].group {
		t.Errorf("failures by reason: %+v, want 6 of %q and 3 of %q", q.Failures, failedGroups[0].group, failedGroups[1].group)
	}
	var v console.Verify
	_, body = get(t, srv, "/verify", viewer, viewerPassword, true)
	decode(t, body, &v)
	if v.Report == nil || len(v.Checks) < 9 {
		t.Errorf("verify: %+v, want every check", v.Report)
	}
}

func TestPostsNeedATokenAndAnOperator(t *testing.T) {
	t.Parallel()
	pool := seededWithFailures(t)
	srv := serve(t, pool, seeded.AsOf)
	failed := func() int { return fixture.CountMessages(t, pool, fixture.Messages{Status: "failed"}) }
	form := url.Values{"status": {"failed"}}

	resp, body := post(t, srv, "/actions/requeue/confirm", operator, operatorPassword, form)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST without a token: %d %s, want 403", resp.StatusCode, body)
	}
	form.Set("csrf", csrfToken(t, srv, viewer, viewerPassword))
	resp, body = post(t, srv, "/actions/requeue/confirm", operator, operatorPassword, form)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST with another user's token: %d %s, want 403", resp.StatusCode, body)
	}
	resp, body = post(t, srv, "/actions/requeue/confirm", viewer, viewerPassword, form)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST by a viewer with their own token: %d %s, want 403", resp.StatusCode, body)
	}
	if n := failed(); n != 9 {
		t.Fatalf("refused POSTs changed the queue: %d failed, want 9", n)
	}

	// A cross-origin POST is refused even with a valid token.
	form.Set("csrf", csrfToken(t, srv, operator, operatorPassword))
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/actions/requeue/confirm", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.SetBasicAuth(operator, operatorPassword)
	if resp, body := do(t, srv, req); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %d %s, want 403", resp.StatusCode, body)
	}

	// A bad filter is a 400 naming it, and changes nothing.
	bad := url.Values{"csrf": form["csrf"], "status": {"failed"}, "ids": {"not-a-uuid"}}
	if resp, body := post(t, srv, "/actions/requeue/preview", operator, operatorPassword, bad); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(body, "not-a-uuid") {
		t.Errorf("POST with a malformed id: %d %s, want 400 naming it", resp.StatusCode, body)
	}
	if n := failed(); n != 9 {
		t.Fatalf("refused POSTs changed the queue: %d failed, want 9", n)
	}
}

func TestRequeueByReasonGroupIsAudited(t *testing.T) {
	t.Parallel()
	pool := seededWithFailures(t)
	srv := serve(t, pool, seeded.AsOf)
	token := csrfToken(t, srv, operator, operatorPassword)
	form := url.Values{"csrf": {token}, "status": {"failed"}, "error_group": {failedGroups[0].group}}

	var preview console.ActionResult
	resp, body := post(t, srv, "/actions/requeue/preview", operator, operatorPassword, form)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("preview: %d %s", resp.StatusCode, body)
	}
	decode(t, body, &preview)
	if preview.Messages != 6 || preview.Confirmed {
		t.Fatalf("preview: %+v, want 6 messages, not confirmed", preview)
	}
	failed, audits := fixture.CountMessages(t, pool, fixture.Messages{Status: "failed"}), len(fixture.ConsoleAudit(t, pool))
	if failed != 9 || audits != 0 {
		t.Fatalf("after the preview: %d failed, %d audit rows; want 9 and 0 (a preview changes nothing)", failed, audits)
	}

	var done console.ActionResult
	resp, body = post(t, srv, "/actions/requeue/confirm", operator, operatorPassword, form)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm: %d %s", resp.StatusCode, body)
	}
	decode(t, body, &done)
	if done.Messages != 6 || !done.Confirmed || done.AuditID == 0 {
		t.Fatalf("confirm: %+v, want 6 messages, confirmed, an audit id", done)
	}
	if leftFailed := fixture.CountMessages(t, pool, fixture.Messages{Status: "failed"}); leftFailed != 3 {
		t.Errorf("after the requeue: %d failed, want the other group's 3", leftFailed)
	}
	var row fixture.AuditEntry
	for _, e := range fixture.ConsoleAudit(t, pool) {
		if e.ID == done.AuditID {
			row = e
		}
	}
	actor, action, filter, messages := row.Actor, row.Action, row.FilterJSON, row.Messages
	if row.ID == 0 {
		t.Fatalf("no audit row %d", done.AuditID)
	}
	if actor != operator || action != "requeue" || messages != 6 || !strings.Contains(filter, failedGroups[0].group) {
		t.Errorf("audit row: %s %s %s %d, want ops requeue of the group, 6", actor, action, filter, messages)
	}
	var audit console.Audit
	_, body = get(t, srv, "/audit", viewer, viewerPassword, true)
	decode(t, body, &audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Actor != operator || audit.Entries[0].Messages != 6 {
		t.Errorf("audit page: %+v, want the one requeue", audit.Entries)
	}
}

func TestCancelPendingByKind(t *testing.T) {
	t.Parallel()
	pool := seededWithFailures(t)
	srv := serve(t, pool, seeded.AsOf)
	want := int64(fixture.CountMessages(t, pool, fixture.Messages{Status: "pending", Type: "weekly_review"}))
	if want == 0 {
		t.Fatal("the seeded database has no pending weekly review")
	}
	form := url.Values{"csrf": {csrfToken(t, srv, operator, operatorPassword)}, "kind": {"weekly_review"}}
	var done console.ActionResult
	resp, body := post(t, srv, "/actions/cancel/confirm", operator, operatorPassword, form)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", resp.StatusCode, body)
	}
	decode(t, body, &done)
	left := int64(fixture.CountMessages(t, pool, fixture.Messages{Status: "pending", Type: "weekly_review"}))
	var operatorCancelled int64
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{}) {
		if m.CancelReason != nil && *m.CancelReason == "operator" {
			operatorCancelled++
		}
	}
	if done.Messages != want || left != 0 || operatorCancelled != want {
		t.Errorf("cancel: said %d, %d still pending, %d cancelled by the operator; want %d, 0, %d", done.Messages, left, operatorCancelled, want, want)
	}
	// An empty filter cancels nothing: the same rule as engagementctl cancel.
	resp, body = post(t, srv, "/actions/cancel/preview", operator, operatorPassword, url.Values{"csrf": form["csrf"]})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("cancel with no filter: %d %s, want 400", resp.StatusCode, body)
	}
}

func TestUserPageMasksTheJIDAndShowsNoText(t *testing.T) {
	t.Parallel()
	pool := seededWithFailures(t)
	srv := serve(t, pool, seeded.AsOf)
	var id, jid, key string
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{}) {
		if m.MessageType == "goodbye" && m.MessageKey != nil {
			id, jid, key = m.UserID, m.DestinationJID, *m.MessageKey
			break
		}
	}
	if id == "" {
		t.Fatal("the seeded database has no goodbye")
	}
	var u console.User
	resp, body := get(t, srv, "/users?id="+id, viewer, viewerPassword, true)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("user page: %d %s", resp.StatusCode, body)
	}
	decode(t, body, &u)
	if !u.Found || u.State == nil || len(u.Transitions) == 0 || len(u.Messages) == 0 {
		t.Fatalf("user page: %+v, want the user's state, moves and messages", u)
	}
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.Split(jid, "@")[0])
	if u.State.JID != "••••"+digits[len(digits)-4:] {
		t.Errorf("JID shown as %q, want its last 4 digits", u.State.JID)
	}
	for _, asJSON := range []bool{true, false} {
		_, body := get(t, srv, "/users?id="+id, viewer, viewerPassword, asJSON)
		if strings.Contains(body, digits[:len(digits)-4]) || strings.Contains(body, jid) || strings.Contains(body, key) {
			t.Errorf("the user page (json %v) shows the JID or the message's text key", asJSON)
		}
	}
	resp, body = get(t, srv, "/users?id="+url.QueryEscape("1;DROP TABLE users"), viewer, viewerPassword, false)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "not a user id") {
		t.Errorf("a malformed id: %d, want 400 saying so", resp.StatusCode)
	}
}

func TestAPageStopsAtTheStatementTimeout(t *testing.T) {
	t.Parallel()
	// Another connection holds a lock the runs page must wait for: the
	// page gives up after the statement timeout instead of hanging.
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	h, err := console.New(console.Config{Pool: pool, StatementTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptestServer(t, h)
	locker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback(ctx) //nolint:errcheck
	fixture.ConsoleLockRuns(t, locker)
	resp, body := get(t, srv, "/runs", "", "", true)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("GET /runs behind a lock: %d %s, want 500 after the statement timeout", resp.StatusCode, body)
	}
	_ = locker.Rollback(ctx)
	if resp, body := get(t, srv, "/runs", "", "", true); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /runs once the lock is gone: %d %s", resp.StatusCode, body)
	}
}

func httptestServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestReplicasWithOneCSRFKeyAcceptEachOthersForms(t *testing.T) {
	t.Parallel()
	pool := seededWithFailures(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	replica := func(key []byte) *httptest.Server {
		h, err := console.New(console.Config{Pool: pool, CSRFKey: key,
			Auth: console.Auth{Users: htpasswd(t), Operators: []string{operator}}})
		if err != nil {
			t.Fatal(err)
		}
		return httptestServer(t, h)
	}
	a, b, other := replica(key), replica(key), replica(nil)
	form := url.Values{"csrf": {csrfToken(t, a, operator, operatorPassword)}, "status": {"failed"}}
	if resp, body := post(t, b, "/actions/requeue/preview", operator, operatorPassword, form); resp.StatusCode != http.StatusOK {
		t.Errorf("a form from a replica with the same key: %d %s, want 200", resp.StatusCode, body)
	}
	if resp, body := post(t, other, "/actions/requeue/preview", operator, operatorPassword, form); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a form from a console with another key: %d %s, want 403", resp.StatusCode, body)
	}
}
