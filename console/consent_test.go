package console_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
)

// Issue 44: an operator opts a user out on their page, and back in: each
// asks first (the preview changes nothing), then acts, with an audit row
// and a consent event naming the operator; the opt-out cancels what
// waits. A viewer may not.
func TestOptOutAndInOnTheUserPage(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: opsAsOf.Add(-20 * 24 * time.Hour)})
	for g := 1; g <= 2; g++ {
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
			JID: "55@s.whatsapp.net", ScheduledFor: time.Now().Add(time.Duration(g) * time.Hour), Key: user + ":" + strconv.Itoa(g)})
	}
	consent := func(keep func(fixture.ConsentRow) bool) int {
		return fixture.CountWhere(fixture.ConsentEventsOf(t, pool, user), keep)
	}

	action, form := browserForm(t, opsPage(t, srv, "/users?id="+user), `id="consent-form"`, nil)
	code, preview := submit(t, srv, action, form)
	if code != http.StatusOK || !strings.Contains(preview, "Opt this user out") || !strings.Contains(preview, "<strong>2</strong> pending messages are cancelled") {
		t.Fatalf("Opt out…: %d, %.800s; want a preview naming the 2 pending messages", code, preview)
	}
	if n := len(fixture.ConsentEventsOf(t, pool, user)); n != 0 {
		t.Fatalf("the preview recorded %d consent events, want none", n)
	}
	action, form = browserForm(t, preview, `id="confirm"`, nil)
	code, done := submit(t, srv, action, form)
	if code != http.StatusOK || !strings.Contains(done, "Opted out; 2 pending messages cancelled") {
		t.Fatalf("confirm: %d, %.600s", code, done)
	}
	if n := consent(func(e fixture.ConsentRow) bool {
		return e.OptedOut && e.Source == "console" && fixture.Is(e.Actor, "ops")
	}); n != 1 {
		t.Errorf("%d consent events from the console by ops, want 1", n)
	}
	if n := fixture.Audits(t, pool, func(e fixture.AuditEntry) bool {
		return e.Action == "opt_out" && e.Actor == "ops" && e.Is("user_id", user) && e.Messages == 2
	}); n != 1 {
		t.Errorf("%d audit rows for the opt-out, want 1", n)
	}
	if n := fixture.CountWhere(fixture.MessageRows(t, pool, fixture.Messages{Users: []string{user}}), func(m fixture.MessageRow) bool {
		return fixture.Is(m.CancelReason, "opted_out")
	}); n != 2 {
		t.Errorf("%d messages cancelled for the opt-out, want 2", n)
	}

	// The page now offers to opt back in, and shows the history.
	page := opsPage(t, srv, "/users?id="+user)
	if !strings.Contains(page, "Opt in…") || !strings.Contains(page, "opted out</td><td>console</td><td>ops") {
		t.Errorf("the user page after the opt-out lacks the opt-in button or the history:\n%.2000s", page)
	}
	action, form = browserForm(t, page, `id="consent-form"`, nil)
	_, preview = submit(t, srv, action, form)
	action, form = browserForm(t, preview, `id="confirm"`, nil)
	if code, done := submit(t, srv, action, form); code != http.StatusOK || !strings.Contains(done, "Opted in") {
		t.Fatalf("opt back in: %d, %.600s", code, done)
	}
	if optedOut := fixture.ProfileOf(t, pool, user).ReengagementOptOut; optedOut {
		t.Errorf("after the opt-in: opted out %v, want false", optedOut)
	}

	// A viewer may look, not act.
	resp, body := post(t, srv, "/actions/opt_out/preview", viewer, viewerPassword, form)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a viewer's opt-out: %d %.200s, want 403", resp.StatusCode, body)
	}
}

// Issue 56: the user's consent history shows a call superseded by a wish
// the user made later as such: it is there, and it changed nothing.
func TestTheUserPageShowsASupersededWish(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: opsAsOf.Add(-20 * 24 * time.Hour)})
	now := fixture.Now(t, pool)
	fixture.SetConsent(t, pool, fixture.ConsentChange{User: user, OptedOut: true, Source: "bot:keyword", At: now.Add(-time.Minute)})
	fixture.SetConsent(t, pool, fixture.ConsentChange{User: user, OptedOut: false, Source: "meta:user_preferences", At: now.Add(-time.Hour)})
	page := opsPage(t, srv, "/users?id="+user)
	if !strings.Contains(page, "opted in <span class=\"superseded\"") || !strings.Contains(page, "(superseded: changed nothing)</span></td><td>meta:user_preferences") {
		t.Errorf("the user page does not show the late resume as superseded:\n%.3000s", page)
	}
	if strings.Count(page, "(superseded") != 1 || !strings.Contains(page, "Opted out of re-engagement messages") {
		t.Errorf("want one superseded row and the user opted out:\n%.3000s", page)
	}
}

// Issue 44: an operator erases a person from their page: the preview says
// what would change and changes nothing; the confirmation scrubs their
// WhatsApp id and message contents, opts them out and writes an audit row.
func TestEraseOnTheUserPage(t *testing.T) {
	t.Parallel()
	pool := opsDB(t)
	srv := serve(t, pool, opsAsOf)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: opsAsOf.Add(-20 * 24 * time.Hour)})
	const jid = "5511987654321@s.whatsapp.net"
	fixture.SetJID(t, pool, user, fixture.Ptr(jid))
	dayAgo := time.Now().Add(-24 * time.Hour)
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.default",
		Params: `{"name":"Maria-marker"}`, JID: jid, ScheduledFor: dayAgo, Key: user + ":a", Status: "sent", SentAt: dayAgo})
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
		Params: `{"count":"2"}`, JID: jid, ScheduledFor: time.Now().Add(24 * time.Hour), Key: user + ":b", Status: "pending"})
	traces := func() int {
		return fixture.CountWhere(fixture.MessageRows(t, pool, fixture.Messages{Users: []string{user}}), func(m fixture.MessageRow) bool {
			return strings.Contains(m.DestinationJID, "987654321") || strings.Contains(m.Params, "marker")
		})
	}

	action, form := browserForm(t, opsPage(t, srv, "/users?id="+user), `id="erase-form"`, nil)
	code, preview := submit(t, srv, action, form)
	if code != http.StatusOK || !strings.Contains(preview, "This cannot be undone") || !strings.Contains(preview, "2 (1)") {
		t.Fatalf("Erase…: %d, %.1500s; want a preview of 2 messages scrubbed, 1 cancelled", code, preview)
	}
	if n := traces(); n != 2 {
		t.Fatalf("the preview changed the messages: %d still hold the person's id or contents, want 2", n)
	}
	action, form = browserForm(t, preview, `id="confirm"`, nil)
	code, done := submit(t, srv, action, form)
	if code != http.StatusOK || !strings.Contains(done, "Erased: 2 queued messages scrubbed") {
		t.Fatalf("confirm: %d, %.600s", code, done)
	}
	if n := traces(); n != 0 {
		t.Errorf("%d messages still hold the person's id or contents", n)
	}
	if n := fixture.Audits(t, pool, func(e fixture.AuditEntry) bool {
		return e.Action == "erase" && e.Actor == "ops" && e.Is("user_id", user)
	}); n != 1 {
		t.Errorf("%d audit rows for the erase, want 1", n)
	}
	if !fixture.ProfileOf(t, pool, user).ReengagementOptOut {
		t.Errorf("the erased user is not opted out")
	}
}
