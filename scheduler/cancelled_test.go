package scheduler_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/sender"
)

// Issue 17, point 4: status counts cancelled messages by reason, every
// known reason listed (0 included), and those cancelled without one (before
// reasons were recorded) as "unspecified".
func TestStatusCountsCancelledByReason(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: seededAsOf})
	for _, r := range []*string{fixture.Ptr("opted_out"), fixture.Ptr("opted_out"), fixture.Ptr("stale"), fixture.Ptr("operator"), nil} {
		exec(t, pool, `
			INSERT INTO engagement_message_queue (user_id, message_type, destination, destination_jid, status, cancel_reason)
			VALUES ($1, 'goodbye', 'individual', 'x@s.whatsapp.net', 'cancelled', $2)`, user, r)
	}
	exec(t, pool, `INSERT INTO engagement_message_queue (user_id, message_type, destination, destination_jid, status)
		VALUES ($1, 'goodbye', 'individual', 'x@s.whatsapp.net', 'sent')`, user)

	st, err := scheduler.ReadStatus(context.Background(), pool, seededAsOf, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []scheduler.ReasonCount{{Reason: "opted_out", Messages: 2}, {Reason: "stale", Messages: 1},
		{Reason: "no_user", Messages: 0}, {Reason: "operator", Messages: 1}, {Reason: scheduler.ReasonUnspecified, Messages: 1}}
	if !slices.Equal(st.Queue.CancelledByReason, want) {
		t.Errorf("cancelled by reason %+v, want %+v", st.Queue.CancelledByReason, want)
	}
}

// Issue 17, point 4: a goodbye cancelled instead of sent (the user opted
// out, or an operator cancelled it) was queued: goodbye_queued holds. A
// cancelled goodbye does not count towards one_goodbye_per_day, so one
// that replaced it the same day is no violation; requeueing the cancelled
// one next to it is.
func TestVerifyWithCancelledGoodbyes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _, _ := seededPool(t)
	users := []string{}
	rows, err := pool.Query(ctx, movedToGoodbyeSent[:len(movedToGoodbyeSent)-len("LIMIT 1")]+"LIMIT 2")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	if rows.Err() != nil || len(users) != 2 {
		t.Fatalf("users moved to goodbye_sent: %v, %v", users, rows.Err())
	}
	// One cancelled by the operator, one at send time because the user opted out.
	if n, err := sender.Cancel(ctx, pool, sender.CancelFilter{UserID: users[0], Type: "goodbye"}, false); err != nil || n != 1 {
		t.Fatalf("cancel: %d, %v", n, err)
	}
	exec(t, pool, `UPDATE user_profiles SET reengagement_opt_out = true WHERE user_id = $1`, users[1])
	exec(t, pool, `UPDATE engagement_message_queue SET status = 'cancelled', cancel_reason = 'opted_out'
		WHERE user_id = $1 AND message_type = 'goodbye'`, users[1])

	rep := verify(t, pool, seededAsOf.Add(time.Hour))
	if !rep.OK {
		t.Fatalf("verify with cancelled goodbyes: broken %v: %+v", rep.Broken, rep.Checks)
	}

	// An operator's replacement goodbye the same day, under another key.
	exec(t, pool, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, destination, destination_jid, scheduled_for, idempotency_key)
		SELECT user_id, message_type, message_key, destination, destination_jid, scheduled_for, 'ops-resend:goodbye_sent:2026-03-02'
		  FROM engagement_message_queue WHERE user_id = $1 AND message_type = 'goodbye'`, users[0])
	if rep := verify(t, pool, seededAsOf.Add(time.Hour)); !rep.OK {
		t.Fatalf("a cancelled goodbye and its replacement the same day: broken %v", rep.Broken)
	}
	if n, err := sender.Requeue(ctx, pool, sender.RequeueFilter{Status: "cancelled", Reason: "operator"}, false); err != nil || n != 1 {
		t.Fatalf("requeue: %d, %v", n, err)
	}
	rep = verify(t, pool, seededAsOf.Add(time.Hour))
	if c := checkOf(t, rep, scheduler.CheckOneGoodbyePerDay); c.OK || c.Violations != 1 || !slices.Equal(rep.Broken, []string{scheduler.CheckOneGoodbyePerDay}) {
		t.Errorf("two live goodbyes for one day after the requeue: broken %v, %+v; want one_goodbye_per_day alone", rep.Broken, c)
	}
}
