package verify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/verify"
)

// Issue 44: no_send_after_opt_out finds a message sent while its user was
// opted out, past the grace a send that had started may take, and nothing
// else: not a send before the opt-out, within the grace, after an opt-in,
// or before an opt-out recorded late.
func TestVerifyNoSendAfterOptOut(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	event := func(user string, out bool, at, recorded time.Time) {
		t.Helper()
		fixture.Exec(t, pool, `INSERT INTO engagement_consent_events (user_id, opted_out, source, at, created_at)
		                       VALUES ($1, $2, 'bot:keyword', $3, $4)`, user, out, at, recorded)
	}
	n := 0
	sentKind := func(kind sm.Message, user string, at time.Time) string {
		t.Helper()
		n++
		var id string
		if err := pool.QueryRow(ctx, `
			INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
			       destination_jid, scheduled_for, status, sent_at, idempotency_key)
			VALUES ($1::uuid, $4, 'engagement.weekly_review.celebration', '{}', 'individual', '5511900000001@s.whatsapp.net',
			        $2::timestamptz - interval '1 minute', 'sent', $2, $1::text || ':review:' || $3::text)
			RETURNING id`, user, at, time.Duration(n).String(), string(kind)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	sent := func(user string, at time.Time) string { return sentKind(sm.WeeklyReviewMessage, user, at) }
	user := func() string { return fixture.User(t, pool, fixture.UserOptions{LastActivity: ago(time.Hour)}) }

	// Opted out an hour ago: before, within the grace, and (broken) after.
	a := user()
	event(a, true, ago(time.Hour), ago(time.Hour))
	sent(a, ago(70*time.Minute))
	sent(a, ago(time.Hour).Add(verify.OptOutGrace-time.Second))
	late := sent(a, ago(50*time.Minute))
	// Out, then back in: sent after the opt-in.
	b := user()
	event(b, true, ago(3*time.Hour), ago(3*time.Hour))
	event(b, false, ago(2*time.Hour), ago(2*time.Hour))
	sent(b, ago(time.Hour))
	// An opt-out said two hours ago but recorded now: what went before it
	// was recorded could not be stopped.
	c := user()
	event(c, true, ago(2*time.Hour), now)
	sent(c, ago(time.Hour))
	// The opt-out's confirmation, sent (late) while its user is opted out:
	// exempt, the one kind sent only then.
	d := user()
	event(d, true, ago(2*time.Hour), ago(2*time.Hour))
	sentKind(sm.OptOutConfirmationMessage, d, ago(time.Hour))

	// Issue 56: in, said an hour ago, then an opt-out said two hours ago
	// arriving after it: superseded, it changed nothing, and a send after
	// it is no violation.
	e := user()
	fixture.Exec(t, pool, `SELECT engagement_opt_in($1::uuid, 'bot:keyword', $2)`, e, ago(time.Hour))
	fixture.Exec(t, pool, `SELECT engagement_opt_out($1::uuid, 'meta:user_preferences', $2)`, e, ago(2*time.Hour))
	if n := fixture.Count(t, pool, `SELECT count(*) FROM engagement_consent_events WHERE user_id = $1 AND opted_out AND superseded`, e); n != 1 {
		t.Fatalf("%d superseded opt-outs, want 1", n)
	}
	fixture.Exec(t, pool, `UPDATE engagement_consent_events SET created_at = $2 WHERE user_id = $1`, e, ago(90*time.Minute))
	sent(e, ago(30*time.Minute))

	rep, err := verify.Run(ctx, pool, verify.Config{AsOf: now})
	if err != nil {
		t.Fatal(err)
	}
	got := checkOf(t, rep, verify.CheckNoSendAfterOptOut)
	if got.OK || got.Violations != 1 || len(got.Examples) != 1 || !strings.HasPrefix(got.Examples[0], late+" (user "+a) || got.Exempt != 1 {
		t.Errorf("no_send_after_opt_out: %+v; want the one message sent 10 minutes after its user's opt-out, and the confirmation exempt", got)
	}
}
