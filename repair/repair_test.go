package repair_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/repair"
)

// queueRow is what a repair test sets on, and reads back from, one queue row.
type queueRow struct {
	Type, Status, Key string
	Error, Reason     *string
	Retries           int
	ScheduledFor      time.Time
	ClaimedBy         *string // claimed by (and so processing), for two minutes
}

// insertRow queues one message for user as r says and returns its id.
func insertRow(t *testing.T, db fixture.DB, user string, r queueRow) string {
	t.Helper()
	if r.ScheduledFor.IsZero() {
		r.ScheduledFor = time.Now().Add(-time.Hour)
	}
	id := fixture.Queue(t, db, fixture.Message{User: user, Type: r.Type, CatalogKey: "engagement.goodbye.self_select",
		ScheduledFor: r.ScheduledFor, Status: r.Status, RetryCount: r.Retries, Error: deref(r.Error),
		CancelReason: deref(r.Reason), Key: r.Key})
	if r.ClaimedBy != nil {
		if r.Status != "processing" {
			t.Fatalf("a claimed message is processing, not %s", r.Status)
		}
		fixture.RepairClaim(t, db, id, *r.ClaimedBy)
	}
	return id
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// readRow reads back a queue row.
func readRow(t *testing.T, db fixture.DB, id string) queueRow {
	t.Helper()
	m := fixture.MessageByID(t, db, id)
	r := queueRow{Type: m.MessageType, Status: m.Status, Error: m.ErrorMessage, Reason: m.CancelReason, Retries: m.RetryCount,
		ScheduledFor: m.ScheduledFor, ClaimedBy: m.ClaimedBy}
	if m.IdempotencyKey == nil {
		t.Fatalf("message %s has no idempotency key", id)
	}
	r.Key = *m.IdempotencyKey
	return r
}

// Issue 17, point 3: requeue puts failed messages back to pending, retry
// count 0, error cleared, due now, under the same id and idempotency key,
// and touches nothing it was not asked to: other statuses (in flight
// included), other types, other errors.
func TestRequeueFailedKeepsIDAndKey(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	user := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now()})
	e503, e422, e503b := "webhook: HTTP 503", "webhook: HTTP 422 (permanent)", "webhook: HTTP 503 after Retry-After"
	holder := "other-host:42:abc"
	ids := map[string]string{
		"failed 503":       insertRow(t, tx, user, queueRow{Type: "goodbye", Status: "failed", Key: "k-503", Error: &e503, Retries: 3}),
		"failed 422":       insertRow(t, tx, user, queueRow{Type: "goodbye", Status: "failed", Key: "k-422", Error: &e422}),
		"failed review":    insertRow(t, tx, user, queueRow{Type: "weekly_review", Status: "failed", Key: "k-rev", Error: &e503b, Retries: 3}),
		"cancelled":        insertRow(t, tx, user, queueRow{Type: "goodbye", Status: "cancelled", Key: "k-can", Error: &e503, Reason: fixture.Ptr("opted_out")}),
		"processing":       insertRow(t, tx, user, queueRow{Type: "goodbye", Status: "processing", Key: "k-pro", Error: &e503, Retries: 2, ClaimedBy: &holder}),
		"pending":          insertRow(t, tx, user, queueRow{Type: "goodbye", Status: "pending", Key: "k-pen", Error: &e503, Retries: 1}),
		"sent":             insertRow(t, tx, user, queueRow{Type: "goodbye", Status: "sent", Key: "k-snt", Error: &e503}),
		"failed no error":  insertRow(t, tx, user, queueRow{Type: "goodbye", Status: "failed", Key: "k-nil"}),
		"failed other key": insertRow(t, tx, user, queueRow{Type: "goodbye", Status: "failed", Key: "k-503-2", Error: &e503, Retries: 3}),
	}
	before := map[string]queueRow{}
	for name, id := range ids {
		before[name] = readRow(t, tx, id)
	}

	f := repair.RequeueFilter{Type: "goodbye", ErrorContains: "http 503"}
	n, err := repair.Requeue(ctx, tx, f, true)
	if err != nil || n != 2 {
		t.Fatalf("dry run: %d, %v; want 2 (the two failed goodbyes with a 503)", n, err)
	}
	for name, id := range ids {
		if got := readRow(t, tx, id); got.Status != before[name].Status {
			t.Errorf("dry run changed %s: status %s", name, got.Status)
		}
	}

	now := fixture.Now(t, tx) // the transaction's clock, what now() writes
	n, err = repair.Requeue(ctx, tx, f, false)
	if err != nil || n != 2 {
		t.Fatalf("requeue: %d, %v; want 2", n, err)
	}
	for name, id := range ids {
		got := readRow(t, tx, id)
		if name == "failed 503" || name == "failed other key" {
			if got.Status != "pending" || got.Retries != 0 || got.Error != nil || got.Reason != nil || got.Key != before[name].Key {
				t.Errorf("%s after requeue: %+v; want pending, 0 retries, no error or reason, key %s", name, got, before[name].Key)
			}
			if !got.ScheduledFor.Equal(now) {
				t.Errorf("%s scheduled for %s, want now (%s)", name, got.ScheduledFor, now)
			}
			continue
		}
		if got.Status != before[name].Status || got.Retries != before[name].Retries || got.ScheduledFor != before[name].ScheduledFor {
			t.Errorf("requeue touched %s: %+v, was %+v", name, got, before[name])
		}
	}
	if got := readRow(t, tx, ids["processing"]); got.ClaimedBy == nil || *got.ClaimedBy != holder {
		t.Errorf("the message in flight lost its claim: %+v", got)
	}

	// By id, and the cancelled one with --status cancelled and its reason.
	if n, err := repair.Requeue(ctx, tx, repair.RequeueFilter{IDs: []string{ids["failed 422"], ids["cancelled"]}}, false); err != nil || n != 1 {
		t.Errorf("requeue by ids: %d, %v; want 1 (the cancelled one is not failed)", n, err)
	}
	if n, err := repair.Requeue(ctx, tx, repair.RequeueFilter{Status: "cancelled", Reason: "stale"}, false); err != nil || n != 0 {
		t.Errorf("requeue cancelled as stale: %d, %v; want 0 (it was opted_out)", n, err)
	}
	if n, err := repair.Requeue(ctx, tx, repair.RequeueFilter{Status: "cancelled", Reason: "opted_out"}, false); err != nil || n != 1 {
		t.Errorf("requeue cancelled as opted_out: %d, %v; want 1", n, err)
	}
	if got := readRow(t, tx, ids["cancelled"]); got.Status != "pending" || got.Reason != nil || got.Error != nil {
		t.Errorf("the cancelled message after requeue: %+v; want pending without reason or error", got)
	}
	// Everything else that failed: the review and the one without an error.
	if n, err := repair.Requeue(ctx, tx, repair.RequeueFilter{}, false); err != nil || n != 2 {
		t.Errorf("requeue every failed message: %d, %v; want 2", n, err)
	}
	if got := readRow(t, tx, ids["processing"]); got.Status != "processing" || got.Retries != 2 {
		t.Errorf("the message in flight after requeueing everything: %+v", got)
	}
}

// --since/--until select by when a message settled: its latest attempt in
// the send ledger, or when it came due if it has none after that.
func TestRequeueSinceUntilUseTheLastAttempt(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	user := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now()})
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	e := "webhook: HTTP 500"
	// Due at 06:00, last attempt (ledger) at 09:30: settled 09:30.
	retried := insertRow(t, tx, user, queueRow{Type: "goodbye", Status: "failed", Key: "a", Error: &e, Retries: 3, ScheduledFor: day.Add(6 * time.Hour)})
	fixture.Ledger(t, tx, fixture.LedgerRow{Message: retried, Transport: "webhook", Status: "failed",
		FirstAttempt: day.Add(6 * time.Hour), LastAttempt: day.Add(9*time.Hour + 30*time.Minute), Error: e})
	// Cancelled when it came due at 08:00 (no attempt).
	cancelled := insertRow(t, tx, user, queueRow{Type: "goodbye", Status: "cancelled", Key: "b", Reason: fixture.Ptr("stale"), ScheduledFor: day.Add(8 * time.Hour)})

	for _, c := range []struct {
		status       string
		since, until time.Duration
		want         int64
	}{
		{"failed", 9 * time.Hour, 10 * time.Hour, 1},   // the last attempt, not the due time
		{"failed", 5 * time.Hour, 9 * time.Hour, 0},    // the due time alone does not count
		{"failed", 9*time.Hour + 30*time.Minute, 0, 1}, // since is inclusive
		{"failed", 0, 9*time.Hour + 30*time.Minute, 0}, // until is exclusive
		{"cancelled", 7 * time.Hour, 9 * time.Hour, 1},
		{"cancelled", 9 * time.Hour, 0, 0},
	} {
		f := repair.RequeueFilter{Status: c.status}
		if c.since != 0 {
			f.Since = day.Add(c.since)
		}
		if c.until != 0 {
			f.Until = day.Add(c.until)
		}
		if n, err := repair.Requeue(ctx, tx, f, true); err != nil || n != c.want {
			t.Errorf("%s since %s until %s: %d, %v; want %d", c.status, c.since, c.until, n, err, c.want)
		}
	}
	_ = cancelled
}

// Issue 17, point 3: cancel moves pending messages to cancelled (reason
// operator) by id, user, type or key, keeps the key, and never touches a
// message in flight or already settled.
func TestCancelPendingByFilters(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	alice := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now()})
	bob := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now()})
	holder := "other-host:42:abc"
	ids := map[string]string{
		"alice goodbye":    insertRow(t, tx, alice, queueRow{Type: "goodbye", Status: "pending", Key: alice + ":goodbye_sent:2026-03-02"}),
		"alice review":     insertRow(t, tx, alice, queueRow{Type: "weekly_review", Status: "pending", Key: alice + ":weekly_review:2026-W10"}),
		"alice in flight":  insertRow(t, tx, alice, queueRow{Type: "goodbye", Status: "processing", Key: "fl", ClaimedBy: &holder}),
		"alice failed":     insertRow(t, tx, alice, queueRow{Type: "goodbye", Status: "failed", Key: "fa"}),
		"bob goodbye":      insertRow(t, tx, bob, queueRow{Type: "goodbye", Status: "pending", Key: bob + ":goodbye_sent:2026-03-02"}),
		"bob review later": insertRow(t, tx, bob, queueRow{Type: "weekly_review", Status: "pending", Key: "br", ScheduledFor: time.Now().Add(24 * time.Hour)}),
	}

	if n, err := repair.Cancel(ctx, tx, repair.CancelFilter{UserID: alice}, true); err != nil || n != 2 {
		t.Fatalf("dry run for alice: %d, %v; want 2", n, err)
	}
	if got := readRow(t, tx, ids["alice goodbye"]); got.Status != "pending" {
		t.Fatalf("dry run cancelled: %+v", got)
	}
	if n, err := repair.Cancel(ctx, tx, repair.CancelFilter{UserID: alice, Type: "goodbye"}, false); err != nil || n != 1 {
		t.Fatalf("cancel alice's goodbye: %d, %v; want 1", n, err)
	}
	got := readRow(t, tx, ids["alice goodbye"])
	if got.Status != "cancelled" || got.Reason == nil || *got.Reason != "operator" || got.Key != alice+":goodbye_sent:2026-03-02" {
		t.Errorf("alice's goodbye: %+v; want cancelled by the operator, same key", got)
	}
	if n, err := repair.Cancel(ctx, tx, repair.CancelFilter{Key: " " + bob + ":goodbye_sent:2026-03-02 "}, false); err != nil || n != 1 {
		t.Errorf("cancel by key: %d, %v; want 1", n, err)
	}
	if n, err := repair.Cancel(ctx, tx, repair.CancelFilter{IDs: []string{ids["alice review"], ids["alice in flight"], ids["alice failed"]}}, false); err != nil || n != 1 {
		t.Errorf("cancel by ids: %d, %v; want 1 (only the review is pending)", n, err)
	}
	if n, err := repair.Cancel(ctx, tx, repair.CancelFilter{All: true}, false); err != nil || n != 1 {
		t.Errorf("cancel --all: %d, %v; want 1 (bob's later review)", n, err)
	}
	if got := readRow(t, tx, ids["alice in flight"]); got.Status != "processing" || got.ClaimedBy == nil || got.Reason != nil {
		t.Errorf("the message in flight: %+v; want untouched", got)
	}
	if got := readRow(t, tx, ids["alice failed"]); got.Status != "failed" || got.Reason != nil {
		t.Errorf("the failed message: %+v; want untouched", got)
	}
}

// A message that a queue-process is claiming at the very moment cancel runs
// (its claim holds the row lock, uncommitted) is left to the claim: cancel
// waits for it and then finds the message in flight, not pending. The
// claim here is a real second connection holding the row lock, as
// claim.sql's FOR UPDATE does.
func TestCancelLeavesAMessageBeingClaimedToItsClaim(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	claimed := insertRow(t, pool, user, queueRow{Type: "goodbye", Status: "pending", Key: "claimed"})
	other := insertRow(t, pool, user, queueRow{Type: "weekly_review", Status: "pending", Key: "other"})

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	fixture.RepairClaim(t, tx, claimed, "worker")
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := repair.Cancel(ctx, pool, repair.CancelFilter{UserID: user}, false)
		done <- result{n, err}
	}()
	// Cancel must wait on the claim's row lock; see it waiting, then commit.
	if _, ok := fixture.PollFor(10*time.Second, func() (int, bool) {
		n := fixture.WaitingOnLocks(t, pool)
		return n, n > 0
	}); !ok {
		t.Fatal("cancel never waited for the claim's row lock")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.n != 1 {
		t.Errorf("cancel: %d, %v; want 1 (the message not being claimed)", r.n, r.err)
	}
	if got := readRow(t, pool, claimed); got.Status != "processing" || got.Reason != nil {
		t.Errorf("the claimed message: %+v; want processing, untouched", got)
	}
	if got := readRow(t, pool, other); got.Status != "cancelled" {
		t.Errorf("the other message: %+v; want cancelled", got)
	}
}

// A bad filter is refused before any statement runs, naming the flag.
func TestRepairFiltersRejectBadInput(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, c := range []struct {
		name string
		f    interface{ Validate() error }
		want string
	}{
		{"unknown status", &repair.RequeueFilter{Status: "sent"}, "--status"},
		{"reason without cancelled", &repair.RequeueFilter{Reason: "stale"}, "--reason"},
		{"unknown reason", &repair.RequeueFilter{Status: "cancelled", Reason: "bored"}, "--reason"},
		{"since after until", &repair.RequeueFilter{Since: now, Until: now.Add(-time.Hour)}, "--since"},
		{"malformed id", &repair.RequeueFilter{IDs: []string{"123"}}, "--ids"},
		{"cancel without filter", &repair.CancelFilter{}, "--all"},
		{"cancel all with filter", &repair.CancelFilter{All: true, Type: "goodbye"}, "--all"},
		{"cancel malformed user", &repair.CancelFilter{UserID: "bob"}, "--user-id"},
		{"cancel malformed id", &repair.CancelFilter{IDs: []string{"00000000-0000-0000-0000-00000000000"}}, "--ids"},
		{"cancel key too long", &repair.CancelFilter{Key: strings.Repeat("k", 129)}, "--key"},
	} {
		err := c.f.Validate()
		if !errors.Is(err, repair.ErrBadFilter) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a bad filter naming %s", c.name, err, c.want)
		}
	}
	// Another surface names the fields its own way (issue 41: the console's
	// form has no --user-id), and the CLI's wording stays as it was.
	err := (&repair.CancelFilter{UserID: "bob%s"}).Validate()
	var fe *repair.FilterError
	if !errors.As(err, &fe) {
		t.Fatalf("cancel malformed user: %v; want a *FilterError", err)
	}
	label := func(field string) string { return map[string]string{"user_id": "user id"}[field] }
	if got, want := fe.In(label), `user id "bob%s" is not a UUID`; got != want {
		t.Errorf("In(labels): %q, want %q", got, want)
	}
	if got, want := err.Error(), `bad filter: --user-id "bob%s" is not a UUID`; got != want {
		t.Errorf("Error(): %q, want %q", got, want)
	}
	f := repair.RequeueFilter{IDs: []string{" 00000000-0000-0000-0000-000000000001", "", "00000000-0000-0000-0000-000000000001"}}
	if err := f.Validate(); err != nil || f.Status != "failed" || len(f.IDs) != 1 {
		t.Errorf("defaults: %+v, %v; want status failed and one id", f, err)
	}
}
