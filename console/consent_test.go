package console_test

import (
	"context"
	"net/http"
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
	fixture.Exec(t, pool, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for, idempotency_key)
		SELECT $1::uuid, 'weekly_review', 'engagement.weekly_review.celebration', '{}', 'individual', '55@s.whatsapp.net',
		       now() + g * interval '1 hour', $1::uuid::text || ':' || g FROM generate_series(1, 2) g`, user)
	count := func(sql string) int { return fixture.Count(t, pool, sql, user) }

	action, form := browserForm(t, opsPage(t, srv, "/users?id="+user), `id="consent-form"`, nil)
	code, preview := submit(t, srv, action, form)
	if code != http.StatusOK || !strings.Contains(preview, "Opt this user out") || !strings.Contains(preview, "<strong>2</strong> pending messages are cancelled") {
		t.Fatalf("Opt out…: %d, %.800s; want a preview naming the 2 pending messages", code, preview)
	}
	if n := count(`SELECT count(*) FROM engagement_consent_events WHERE user_id = $1`); n != 0 {
		t.Fatalf("the preview recorded %d consent events, want none", n)
	}
	action, form = browserForm(t, preview, `id="confirm"`, nil)
	code, done := submit(t, srv, action, form)
	if code != http.StatusOK || !strings.Contains(done, "Opted out; 2 pending messages cancelled") {
		t.Fatalf("confirm: %d, %.600s", code, done)
	}
	if n := count(`SELECT count(*) FROM engagement_consent_events WHERE user_id = $1 AND opted_out AND source = 'console' AND actor = 'ops'`); n != 1 {
		t.Errorf("%d consent events from the console by ops, want 1", n)
	}
	if n := count(`SELECT count(*) FROM engagement_console_audit WHERE action = 'opt_out' AND actor = 'ops' AND filter->>'user_id' = $1::text AND messages = 2`); n != 1 {
		t.Errorf("%d audit rows for the opt-out, want 1", n)
	}
	if n := count(`SELECT count(*) FROM engagement_message_queue WHERE user_id = $1 AND cancel_reason = 'opted_out'`); n != 2 {
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
	var optedOut bool
	if err := pool.QueryRow(context.Background(), `SELECT reengagement_opt_out FROM user_profiles WHERE user_id = $1`, user).Scan(&optedOut); err != nil || optedOut {
		t.Errorf("after the opt-in: opted out %v (%v), want false", optedOut, err)
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
	fixture.Exec(t, pool, `SELECT engagement_opt_out($1::uuid, 'bot:keyword', now() - interval '1 minute')`, user)
	fixture.Exec(t, pool, `SELECT engagement_opt_in($1::uuid, 'meta:user_preferences', now() - interval '1 hour')`, user)
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
	fixture.Exec(t, pool, `UPDATE user_profiles SET whatsapp_jid = '5511987654321@s.whatsapp.net' WHERE user_id = $1`, user)
	fixture.Exec(t, pool, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for, idempotency_key, status, sent_at)
		VALUES ($1::uuid, 'goodbye', 'engagement.goodbye.default', '{"name":"Maria-marker"}', 'individual', '5511987654321@s.whatsapp.net',
		        now() - interval '1 day', $1::uuid::text || ':a', 'sent', now() - interval '1 day'),
		       ($1::uuid, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual', '5511987654321@s.whatsapp.net',
		        now() + interval '1 day', $1::uuid::text || ':b', 'pending', NULL)`, user)
	traces := func() int {
		return fixture.Count(t, pool, `SELECT count(*) FROM engagement_message_queue
			WHERE user_id = $1 AND (destination_jid LIKE '%987654321%' OR message_params::text LIKE '%marker%')`, user)
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
	if n := fixture.Count(t, pool, `SELECT count(*) FROM engagement_console_audit WHERE action = 'erase' AND actor = 'ops' AND filter->>'user_id' = $1::text`, user); n != 1 {
		t.Errorf("%d audit rows for the erase, want 1", n)
	}
	if n := fixture.Count(t, pool, `SELECT count(*) FROM user_profiles WHERE user_id = $1 AND reengagement_opt_out`, user); n != 1 {
		t.Errorf("the erased user is not opted out")
	}
}
