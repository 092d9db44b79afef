package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Issue 44: the check just before a send turns the opt-out rule around for
// the opt-out's confirmation. Claimed messages of three users: a weekly
// review and a confirmation for an opted-out user, a confirmation for a
// user who opted back in after the claim. The review is cancelled
// (opted_out), the opted-in user's confirmation too (stale), and the
// opted-out user's confirmation goes on to its send.
func TestRecheckSendsTheConfirmationOnlyWhileOptedOut(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	out := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now(), OptedOut: true})
	back := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now()})
	// Each had opted out (the opt-out a confirmation answers, migration
	// 69); back opted in since.
	if _, err := tx.Exec(ctx, `INSERT INTO engagement_consent_events (user_id, opted_out, source, at)
	                           VALUES ($1, true, 'test', '2026-01-01Z'), ($2, true, 'test', '2026-01-01Z')`, out, back); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, destination, destination_jid,
		       scheduled_for, idempotency_key, status, claimed_by, claimed_until, period_start)
		SELECT m.u, m.t, 'engagement.opt_out.confirmation', 'individual', '55@s.whatsapp.net', now(), m.u::text || m.t,
		       'processing', 'h', now() + interval '1 minute', '2026-01-01Z'
		  FROM (VALUES ($1::uuid, 'weekly_review'), ($1::uuid, $3), ($2::uuid, $3)) m (u, t)
		RETURNING id::text`, out, back, string(sm.OptOutConfirmationMessage))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := recheckQuery.All(ctx, tx, recheckArgs{IDs: ids, Holder: "h", Kinds: sendRules})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range cancelled {
		got[r.ID] = r.CancelReason
	}
	want := map[string]string{ids[0]: "opted_out", ids[2]: "stale"}
	if len(got) != len(want) || got[ids[0]] != want[ids[0]] || got[ids[2]] != want[ids[2]] {
		t.Errorf("recheck cancelled %v; want %v (the opted-out user's confirmation %s kept)", got, want, ids[1])
	}
}
