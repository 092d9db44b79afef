package activity_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
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
	return fixture.Queue(t, db, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
		Params: `{"count":"2"}`, JID: "5511999990000@s.whatsapp.net", ScheduledFor: sentAt, Key: providerID,
		Status: "sent", SentAt: sentAt, ProviderID: providerID})
}

func rowOf(t *testing.T, db fixture.DB, id string) receiptRow {
	t.Helper()
	m := fixture.MessageByID(t, db, id)
	return receiptRow{Status: m.Status, DeliveredAt: m.DeliveredAt, ReadAt: m.ReadAt, Error: m.ErrorMessage, InDoubt: m.InDoubt}
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

// processingMessage queues a message to a new user as queue-process holds
// one whose send is under way: claimed, no provider id recorded yet.
func processingMessage(t *testing.T, db fixture.DB, at time.Time) string {
	t.Helper()
	user := fixture.User(t, db, fixture.UserOptions{LastActivity: at})
	return fixture.Queue(t, db, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
		Params: `{"count":"2"}`, JID: "5511999990000@s.whatsapp.net", ScheduledFor: at, Key: user + ":weekly_review:test",
		Status: "processing"})
}

// recordSent records m's send under providerID, as settle.sql does.
func recordSent(t *testing.T, db fixture.DB, id, providerID string) {
	t.Helper()
	fixture.SetMessages(t, db, fixture.MessageChange{ID: id, SetStatus: "sent", SentAt: fixture.Now(t, db), ProviderID: providerID})
}

// Meta posts a status within milliseconds of answering the API call, and
// Baileys acks within a second: before queue-process records the provider
// id. Such receipts are kept (engagement_receipt still answers nothing
// for them) and apply when the send is recorded, exactly as if they had
// come after: the earliest delivery, read, a late failure with its code.
func TestReceiptsThatComeFirstApplyWhenTheSendIsRecorded(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	now := fixture.Now(t, tx).Truncate(time.Microsecond)
	delivered, read := now.Add(-2*time.Minute), now.Add(-time.Minute)

	early := processingMessage(t, tx, now.Add(-time.Hour))
	for _, r := range []struct {
		status string
		at     time.Time
	}{{activity.ReceiptSent, delivered}, {activity.ReceiptRead, read}, {activity.ReceiptDelivered, delivered},
		{activity.ReceiptDelivered, delivered}} { // Meta resends until answered 200
		if known, ok, err := receiptIn(ctx, tx, "wamid.early", r.status, activity.ReceiptOptions{At: r.at}); err != nil || ok || known != "" {
			t.Fatalf("a %s receipt before the send is recorded: %q, %v, %v; want nothing yet", r.status, known, ok, err)
		}
	}
	if kept := fixture.KeptReceipts(t, tx, "wamid.early", ""); kept != 3 {
		t.Fatalf("kept receipts: %d; want 3 (a repeat is kept once)", kept)
	}
	recordSent(t, tx, early, "wamid.early")
	if r := rowOf(t, tx, early); r.Status != "sent" || !sameTime(r.DeliveredAt, &delivered) || !sameTime(r.ReadAt, &read) {
		t.Errorf("after the send was recorded: %+v; want sent, delivered %s, read %s", r, delivered, read)
	}
	if kept := fixture.KeptReceipts(t, tx, "wamid.early", ""); kept != 0 {
		t.Errorf("kept receipts after they applied: %d; want none", kept)
	}

	// A late failure that came first fails the message once it is recorded.
	lost := processingMessage(t, tx, now.Add(-time.Hour))
	if _, ok, err := receiptIn(ctx, tx, "wamid.lost", activity.ReceiptFailed, activity.ReceiptOptions{ErrorCode: "131026"}); err != nil || ok {
		t.Fatalf("an early failure: %v, %v", ok, err)
	}
	recordSent(t, tx, lost, "wamid.lost")
	if r := rowOf(t, tx, lost); r.Status != "failed" || r.Error == nil || !strings.Contains(*r.Error, "131026") {
		t.Errorf("a failure that came first: %+v; want failed with 131026", r)
	}
}

// A receipt that finds no message and the send it is about, recorded at
// the same moment from another connection, never miss each other: every
// receipt applies, whichever commits first.
func TestAReceiptRacingItsSendIsNeverLost(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	now := fixture.Now(t, pool)
	const n = 200
	ids := make([]string, n)
	for i := range ids {
		ids[i] = processingMessage(t, pool, now.Add(-time.Hour))
	}
	errs := make(chan error, 2*n)
	start := make(chan struct{})
	for i, id := range ids {
		pid := "wamid.race." + strconv.Itoa(i)
		go func() {
			<-start
			_, _, err := activity.Receipt(ctx, pool, pid, activity.ReceiptDelivered, activity.ReceiptOptions{})
			errs <- err
		}()
		go func() {
			<-start
			errs <- fixture.ActivityRecordSent(ctx, pool, id, pid)
		}()
	}
	close(start)
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	undelivered := 0
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Type: "weekly_review"}) {
		if slices.Contains(ids, m.ID) && m.DeliveredAt == nil {
			undelivered++
		}
	}
	if undelivered != 0 {
		t.Fatalf("%d of %d messages without their delivery; want none", undelivered, n)
	}
	kept := fixture.KeptReceipts(t, pool, "", "wamid.race.")
	if undelivered != 0 || kept != 0 {
		t.Errorf("%d of %d messages without their delivery, %d receipts kept unapplied; want none", undelivered, n, kept)
	}
}
