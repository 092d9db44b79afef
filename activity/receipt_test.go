package activity_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// receiptRow is what a receipt may change of a message.
type receiptRow struct {
	Status      string
	DeliveredAt *time.Time
	ReadAt      *time.Time
	Error       *string
	InDoubt     *bool
}

// sentMessage queues a message to a new user as queue-process leaves one it
// sent: status sent at sentAt, with the provider's id.
func sentMessage(t *testing.T, db fixture.DB, providerID string, sentAt time.Time) string {
	t.Helper()
	user := fixture.User(t, db, fixture.UserOptions{LastActivity: sentAt})
	var id string
	if err := db.QueryRow(context.Background(), `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for, idempotency_key, status, sent_at, provider_message_id)
		VALUES ($1, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual',
		        '5511999990000@s.whatsapp.net', $2, $3, 'sent', $2, $3)
		RETURNING id::text`, user, sentAt, providerID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func rowOf(t *testing.T, db fixture.DB, id string) receiptRow {
	t.Helper()
	var r receiptRow
	if err := db.QueryRow(context.Background(), `
		SELECT status, delivered_at, read_at, error_message, in_doubt FROM engagement_message_queue WHERE id = $1`, id).
		Scan(&r.Status, &r.DeliveredAt, &r.ReadAt, &r.Error, &r.InDoubt); err != nil {
		t.Fatal(err)
	}
	return r
}

// receiptIn applies a receipt in a savepoint of tx, so a refused one
// leaves the test's transaction usable.
func receiptIn(ctx context.Context, tx pgx.Tx, providerID, status string, o activity.ReceiptOptions) (known string, ok bool, err error) {
	err = pgx.BeginFunc(ctx, tx, func(tx pgx.Tx) error {
		known, ok, err = activity.Receipt(ctx, tx, providerID, status, o)
		return err
	})
	return known, ok, err
}

// Receipts in order, repeated and out of order: a message never moves
// back. read implies delivered; delivered_at and read_at are the earliest
// instants reported; a failure after delivery, or a delivery after a
// failure, changes nothing.
func TestReceiptsNeverMoveAMessageBack(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	now := fixture.Now(t, tx).Truncate(time.Microsecond)
	sent := now.Add(-time.Hour)
	id := sentMessage(t, tx, "wamid.A", sent)
	t1, t2 := sent.Add(time.Minute), sent.Add(10*time.Minute)

	steps := []struct {
		status     string
		at         time.Time
		want       string
		deliv, red *time.Time
	}{
		{activity.ReceiptSent, sent, activity.MessageAccepted, nil, nil},
		{activity.ReceiptRead, t2, activity.MessageRead, &t2, &t2},                       // read first: delivered too
		{activity.ReceiptDelivered, t1, activity.MessageRead, &t1, &t2},                  // an older delivery: the first delivery
		{activity.ReceiptDelivered, t2, activity.MessageRead, &t1, &t2},                  // a repeat, later: nothing
		{activity.ReceiptRead, t2.Add(30 * time.Minute), activity.MessageRead, &t1, &t2}, // read again, later: nothing
		{activity.ReceiptFailed, t2, activity.MessageRead, &t1, &t2},                     // failed after delivery: nothing
	}
	for i, s := range steps {
		known, ok, err := receiptIn(ctx, tx, "wamid.A", s.status, activity.ReceiptOptions{At: s.at, ErrorCode: "131026"})
		if err != nil || !ok || known != s.want {
			t.Fatalf("step %d (%s at %s): %q, %v, %v; want %q", i, s.status, s.at, known, ok, err, s.want)
		}
		r := rowOf(t, tx, id)
		if r.Status != "sent" || !sameTime(r.DeliveredAt, s.deliv) || !sameTime(r.ReadAt, s.red) {
			t.Errorf("step %d (%s at %s): %s, delivered %v, read %v; want sent, %v, %v", i, s.status, s.at,
				r.Status, r.DeliveredAt, r.ReadAt, s.deliv, s.red)
		}
	}
}

// A failure WhatsApp reports after accepting a message (131026: not
// deliverable) makes it failed with the code, not in doubt; a delivery
// reported after it changes nothing.
func TestALateFailureFailsTheMessage(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	now := fixture.Now(t, tx)
	id := sentMessage(t, tx, "wamid.B", now.Add(-time.Hour))
	known, ok, err := receiptIn(ctx, tx, "wamid.B", activity.ReceiptFailed, activity.ReceiptOptions{ErrorCode: "131026"})
	if err != nil || !ok || known != activity.MessageFailed {
		t.Fatalf("failed receipt: %q, %v, %v; want failed", known, ok, err)
	}
	r := rowOf(t, tx, id)
	if r.Status != "failed" || r.Error == nil || !strings.Contains(*r.Error, "131026") || r.InDoubt == nil || *r.InDoubt || r.DeliveredAt != nil {
		t.Errorf("after a late failure: %+v; want failed, the code in the error, not in doubt, not delivered", r)
	}
	if known, _, err := receiptIn(ctx, tx, "wamid.B", activity.ReceiptDelivered, activity.ReceiptOptions{}); err != nil || known != activity.MessageFailed {
		t.Errorf("a delivery after the failure: %q, %v; want failed, unchanged", known, err)
	}
	if r := rowOf(t, tx, id); r.Status != "failed" || r.DeliveredAt != nil {
		t.Errorf("a delivery after the failure changed the message: %+v", r)
	}
}

// An id that is none of the queue's (the bot's own conversation), and an
// empty one, are a quiet nothing; a status WhatsApp does not send, and an
// instant no clock can mean, are refused with their SQLSTATEs and change
// nothing.
func TestReceiptsTheSchedulerCannotUse(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	now := fixture.Now(t, tx)
	id := sentMessage(t, tx, "wamid.C", now.Add(-time.Hour))
	for _, pid := range []string{"wamid.not-ours", ""} {
		if known, ok, err := receiptIn(ctx, tx, pid, activity.ReceiptDelivered, activity.ReceiptOptions{}); err != nil || ok || known != "" {
			t.Errorf("receipt for %q: %q, %v, %v; want nothing, no error", pid, known, ok, err)
		}
	}
	for _, status := range []string{"seen", "DELIVERED", ""} {
		if _, _, err := receiptIn(ctx, tx, "wamid.C", status, activity.ReceiptOptions{}); !errors.Is(err, activity.ErrUnknownReceiptStatus) {
			t.Errorf("status %q: %v, want ErrUnknownReceiptStatus (%s)", status, err, activity.SQLStateUnknownReceiptStatus)
		}
	}
	for _, at := range []time.Time{now.Add(time.Hour), time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, _, err := receiptIn(ctx, tx, "wamid.C", activity.ReceiptDelivered, activity.ReceiptOptions{At: at}); !errors.Is(err, activity.ErrInstantOutOfRange) {
			t.Errorf("a receipt at %s: %v, want ErrInstantOutOfRange", at, err)
		}
	}
	if r := rowOf(t, tx, id); r.Status != "sent" || r.DeliveredAt != nil || r.ReadAt != nil {
		t.Errorf("refused receipts changed the message: %+v", r)
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}
