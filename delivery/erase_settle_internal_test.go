package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/erase"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

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
	ctx := context.Background()
	jid := "5511900000003@s.whatsapp.net"
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &jid})
	id := fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey,
		Params: `{"count":"2"}`, JID: jid, ScheduledFor: time.Now().Add(-time.Minute), Key: "m"})
	fixture.ClaimPending(t, pool, 1)
	holder := fixture.ClaimedBy(t, pool, "h")
	if len(holder) != 1 {
		t.Fatalf("claimed %v; want the message, by h", holder)
	}

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
