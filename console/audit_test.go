package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
)

// TestAuditIsReadableWithAReason: issue 41 found the audit page showing
// each action's filter as raw JSON and no reason. A requeue and a cancel
// take an optional reason, the audit keeps it, and the page shows the
// filter as a list of what was set.
func TestAuditIsReadableWithAReason(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, _ := serveLogged(t, pool)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for range 3 {
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select",
			JID: "5511900000000@s.whatsapp.net", Status: "failed", Error: "webhook: receiver answered 502"})
	}
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "reminder", CatalogKey: "engagement.reminder", JID: "5511900000000@s.whatsapp.net"})
	token := csrfToken(t, srv, operator, operatorPassword)

	resp, body := post(t, srv, "/actions/requeue/confirm", operator, operatorPassword, url.Values{"csrf": {token},
		"status": {"failed"}, "error_group": {"webhook: receiver answered 502"}, "reason": {"  receiver back up, ticket 77 "}})
	var done console.ActionResult
	decode(t, body, &done)
	if resp.StatusCode != http.StatusOK || done.Messages != 3 || done.Reason != "receiver back up, ticket 77" {
		t.Fatalf("requeue with a reason: %d %s; want 3 messages, the reason trimmed", resp.StatusCode, body)
	}
	resp, body = post(t, srv, "/actions/cancel/confirm", operator, operatorPassword, url.Values{"csrf": {token},
		"kind": {"reminder"}, "user_id": {user}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel without a reason: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, srv, "/actions/cancel/confirm", operator, operatorPassword, url.Values{"csrf": {token},
		"kind": {"reminder"}, "user_id": {user}, "reason": {"two\nlines"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "reason") {
		t.Errorf("a two-line reason: %d %s, want 400 naming the reason", resp.StatusCode, body)
	}

	var a console.Audit
	_, body = get(t, srv, "/audit", viewer, viewerPassword, true)
	decode(t, body, &a)
	if len(a.Entries) != 2 || a.Entries[0].Action != "cancel" || a.Entries[0].Reason != "" ||
		a.Entries[1].Action != "requeue" || a.Entries[1].Reason != "receiver back up, ticket 77" {
		t.Fatalf("audit entries %+v, want the cancel without a reason, then the requeue with its reason", a.Entries)
	}
	_, page := get(t, srv, "/audit", viewer, viewerPassword, false)
	for _, want := range []string{"receiver back up, ticket 77", "error_group", "webhook: receiver answered 502", "user_id", user} {
		if !strings.Contains(page, want) {
			t.Errorf("the audit page lacks %q", want)
		}
	}
	// No raw JSON, and nothing left empty or false in the filter shown
	// (neither gave ids; the cancel was not of all).
	if strings.Contains(page, "{&#34;") || strings.Contains(page, `{"`) || strings.Contains(page, "null") {
		t.Errorf("the audit page shows a raw JSON filter")
	}
	if strings.Contains(page, `<span class="k">ids</span>`) || strings.Contains(page, `<span class="k">all</span>`) {
		t.Errorf("the audit page lists filter fields that were not given")
	}
	if n := fixture.Audits(t, pool, func(e fixture.AuditEntry) bool { return e.Reason == nil }); n != 1 {
		t.Errorf("%d audit rows without a reason, want 1 (NULL, not '')", n)
	}
}
