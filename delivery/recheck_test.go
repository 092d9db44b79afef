package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/erase"
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
	jan1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fixture.ConsentEvent(t, tx, out, true, "test", jan1, jan1)
	fixture.ConsentEvent(t, tx, back, true, "test", jan1, jan1)
	confirmation := string(sm.OptOutConfirmationMessage)
	var ids []string
	for _, m := range []struct{ user, kind string }{{out, "weekly_review"}, {out, confirmation}, {back, confirmation}} {
		ids = append(ids, claimedByH(t, tx, fixture.Message{User: m.user, Type: m.kind, CatalogKey: "engagement.opt_out.confirmation",
			JID: "55@s.whatsapp.net", Key: m.user + m.kind, PeriodStart: jan1}))
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

// Issue 58: the reach-out window at the check right before the request.
// A message claimed while its user was inside the window (27 days silent)
// is checked again when the processor's clock has moved on (2 days, as a
// paced or spread run's last sends can be minutes after their claim, and
// the clock input stands for them here): the user is past the window, and
// the message is cancelled, reachout_window. On the claim's clock, or
// with the window off (a transport not held to it), it stays claimed.
func TestRecheckCancelsAMessageWhoseUserCrossedTheReachoutWindow(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	user := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now().Add(-27 * 24 * time.Hour)})
	id := claimedByH(t, tx, fixture.Message{User: user, Type: "account_notice", CatalogKey: fixture.WeeklyReview.CatalogKey,
		JID: "55@s.whatsapp.net", Key: "crossing"})
	window := DefaultReachoutWindow
	for _, c := range []struct {
		name   string
		offset time.Duration
		window *time.Duration
		want   string
	}{
		{"on the claim's clock", 0, &window, ""},
		{"the window off", 2 * 24 * time.Hour, nil, ""},
		{"two days on", 2 * 24 * time.Hour, &window, sm.CancelReachoutWindow},
	} {
		rows, err := recheckQuery.All(ctx, tx, recheckArgs{IDs: []string{id}, Holder: "h", Kinds: sendRules,
			ClockOffset: c.offset, ReachoutWindow: c.window})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, r := range rows {
			got = r.CancelReason
		}
		if got != c.want {
			t.Errorf("%s: the check cancelled it with %q; want %q", c.name, got, c.want)
		}
	}
}

// claimedByH queues m, due now, as claimed by the holder "h" for a minute,
// and returns its id.
func claimedByH(t *testing.T, tx fixture.DB, m fixture.Message) string {
	t.Helper()
	m.Status = "processing"
	id := fixture.Queue(t, tx, m)
	fixture.SetMessages(t, tx, fixture.MessageChange{ID: id, ClaimedBy: "h", ClaimedUntil: time.Now().Add(time.Minute)})
	return id
}

// An erase that meets the settle of a send in flight scrubs what that
// settle wrote. The settle locks the message and writes the send ledger's
// row, with the provider id (a Cloud API wamid encodes the phone number);
// the erase waited for the message's lock inside its scrub, whose snapshot
// was older than the settle's commit, so the ledger row the settle
// inserted stayed unscrubbed (CI at b700051:
// TestEraseStopsClaimedMessagesAndKeepsTheTruth/paced, "1 of the erased
// user's rows hold their JID or a provider id again"). Here the settle
// runs in a transaction held open until the erase waits on it.
func TestAnEraseScrubsWhatASettleItWaitedForWrote(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	user, id := oneDueMessage(t, pool)
	fixture.ClaimPending(t, pool, 1)
	holder := fixture.ClaimedBy(t, pool, "h")
	if len(holder) != 1 {
		t.Fatalf("claimed %v; want the message, by h", holder)
	}

	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := settleQuery.All(ctx, tx, settleArgs{IDs: []string{id}, Statuses: []string{"sent"},
		ProviderIDs: []string{"wamid.HBgNNTUxMTkwMDAwMDAwMxUCABEYEjA"}, RetryIns: []time.Duration{0}, Errors: []string{""},
		Attempted: []int{1}, InDoubt: []bool{false}, Spent: []bool{false}, Holder: "h", Transport: "whatsapp"}); err != nil {
		t.Fatal(err)
	}
	erased := make(chan error, 1)
	go func() {
		_, err := erase.EraseWith(ctx, pool, user, erase.Options{Actor: "dpo"})
		erased <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); fixture.WaitingOnLocks(t, pool) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the erase never waited on the settle's lock")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-erased; err != nil {
		t.Fatal(err)
	}
	m := fixture.MessageByKey(t, pool, "m")
	l := fixture.LedgerOf(t, pool, id, "whatsapp")
	if m.Status != "sent" || m.DestinationJID != "" || m.ProviderMessageID != nil || l == nil || l.ProviderMessageID != nil {
		t.Errorf("after the erase: %s, JID kept %t, provider id %t; ledger %v with a provider id %t; want sent, neither kept",
			m.Status, m.DestinationJID != "", m.ProviderMessageID != nil, l != nil, l != nil && l.ProviderMessageID != nil)
	}
}
