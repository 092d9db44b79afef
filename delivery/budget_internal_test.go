package delivery

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// A claim made with ample room as this processor last saw it, when other
// processes took the room meanwhile, fails whole (SQLSTATE EB001: nothing
// claimed, nothing spent) and is made again under the budget's lock, where
// the one slot left goes to the message due first.
func TestAClaimThatNoLongerFitsIsMadeAgainUnderTheLock(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for i := 1; i <= 2; i++ {
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey,
			Params: `{"count":"2"}`, JID: fmt.Sprintf("55119%d@s.whatsapp.net", i),
			ScheduledFor: time.Now().Add(-time.Duration(3-i) * time.Minute), Key: fmt.Sprintf("race-%d", i)})
	}
	proc, err := NewProcessor(pool, ProcessorConfig{Transport: transport.NewLog(nil), SendInterval: -1, Workers: 1, ClaimBatch: 2,
		DailyLimit: 10, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	p := proc.newRun(func(error) {})
	if p.budget, err = p.openBudget(ctx); err != nil {
		t.Fatal(err)
	}
	// Other processes spend 9 of the 10 slots after this one looked.
	fixture.Spent(t, pool, "log", time.Now(), 9)
	if p.budget.tight(p.cfg.Workers * p.cfg.ClaimBatch) {
		t.Fatal("the processor already sees the window as tight; the test needs it to claim with room")
	}
	batch, _, err := p.claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != 1 || batch[0].IdempotencyKey != "race-1" {
		t.Fatalf("claimed %+v, want the one due first", batch)
	}
	b := fixture.BudgetOf(t, pool, "log")
	used, claims, stamps, waiting := fixture.Deref(b.Used), b.Claims, b.Recipients, waitingOnBudget(t, pool)
	if used != 10 || claims != 1 || stamps != 1 || waiting != 1 {
		t.Errorf("used %d, claim rows %d, recipient stamps %d, waiting %d; want 10, 1 (the others'), 1 and 1", used, claims, stamps, waiting)
	}
	if got := p.tally.deferred["budget"]; got != 1 {
		t.Errorf("%d counted as deferred for the budget, want 1", got)
	}
}

// A run that opens the budget counts what is in the window afresh, and
// drops what left it first: a prune after it must not count the old slots
// off a second time, or the budget would let that many more through.
func TestOpeningTheBudgetCountsNothingOffTwice(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	fixture.Budget(t, pool, "log", 10, 0)
	fixture.Spent(t, pool, "log", time.Now().Add(-25*time.Hour), 3)
	fixture.Spent(t, pool, "log", time.Now().Add(-time.Hour), 5)
	proc, err := NewProcessor(pool, ProcessorConfig{Transport: transport.NewLog(nil), SendInterval: -1, DailyLimit: 10, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	p := proc.newRun(func(error) {})
	if p.budget, err = p.openBudget(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return p.lockBudget(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	if used := fixture.Deref(fixture.BudgetOf(t, pool, "log").Used); used != 5 || p.budget.used.Load() != 5 {
		t.Errorf("used %d (the processor saw %d) after opening and a prune, want the 5 slots in the window", used, p.budget.used.Load())
	}
}

// The step of budget_apply.sql that moves the line back. The head of the
// line (a message that waited on the budget) comes due before the slot it
// was forecast to take really frees, is claimed, finds no room, and keeps
// its place at the head: due when the first slot frees. The messages
// waiting behind it that were due before that must move back to just
// after it, in their order, or they would go ahead of the head; one due
// later stays where it was, and one another transaction holds locked is
// left to it (SKIP LOCKED: the step never waits on a claim in flight).
func TestAHeadThatFindsNoRoomMovesTheLineBehindIt(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	ids := map[string]string{}
	// The window is full (2 of 2): two recipients claimed 23 h 59 min ago,
	// so the first slot frees in a minute.
	fixture.Budget(t, pool, "log", 2, 2)
	for _, r := range []string{fixture.NewID(), fixture.NewID()} {
		fixture.SpentOn(t, pool, "log", r, time.Now().Add(-23*time.Hour-59*time.Minute))
	}
	now := time.Now()
	for _, m := range []struct {
		key string
		at  time.Duration
	}{{"head", -time.Second}, {"w1", 10 * time.Second}, {"locked", 15 * time.Second},
		{"w2", 20 * time.Second}, {"w3", 30 * time.Second}, {"later", 2 * time.Hour}} {
		id := fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey,
			Params: `{"count":"2"}`, JID: "5511" + m.key + "@s.whatsapp.net", ScheduledFor: now.Add(m.at), Key: m.key})
		fixture.SetMessages(t, pool, fixture.MessageChange{ID: id, DeferredReason: "budget"})
		ids[m.key] = id
	}
	before := scheduled(t, pool)

	// Another transaction holds one of the waiting messages.
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx) //nolint:errcheck // a test's
	fixture.LockMessage(t, other, ids["locked"])

	proc, err := NewProcessor(pool, ProcessorConfig{Transport: transport.NewLog(nil), SendInterval: -1, Workers: 1,
		DailyLimit: 2, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	p := proc.newRun(func(error) {})
	if p.budget, err = p.openBudget(ctx); err != nil {
		t.Fatal(err)
	}
	// A claim that waited on the lock would never end: bounded, it fails.
	claimCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	batch, _, err := p.claim(claimCtx)
	if err != nil {
		t.Fatalf("claim: %v (a claim must not wait on a message another transaction holds)", err)
	}
	if len(batch) != 0 {
		t.Fatalf("claimed %d messages with the window full, want none", len(batch))
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	after := scheduled(t, pool)
	head := after["head"]
	if want := before["head"].Add(time.Minute); head.Before(want.Add(-5*time.Second)) || head.After(want.Add(5*time.Second)) {
		t.Errorf("the head is due at %s, want when the first slot frees, about %s", head, want)
	}
	for i, k := range []string{"w1", "w2", "w3"} {
		if want := head.Add(time.Duration(i+1) * time.Microsecond); !after[k].Equal(want) {
			t.Errorf("%s is due at %s (was %s), want %s: right behind the head, in line order", k, after[k], before[k], want)
		}
	}
	for _, k := range []string{"locked", "later"} {
		if !after[k].Equal(before[k]) {
			t.Errorf("%s moved from %s to %s, want it left where it was", k, before[k], after[k])
		}
	}
	if n := waitingOnBudget(t, pool); n != 6 {
		t.Errorf("%d messages waiting on the budget, want all 6", n)
	}
}

// scheduled is each queued message's due time, by idempotency key.
func scheduled(t *testing.T, pool *pgxpool.Pool) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	for _, m := range fixture.AllMessages(t, pool) {
		out[m.Key()] = m.ScheduledFor
	}
	return out
}

// waitingOnBudget counts the pending messages that wait on the budget.
func waitingOnBudget(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	n := 0
	for _, m := range fixture.AllMessages(t, pool) {
		if m.Status == "pending" && deref(m.DeferredReason) == "budget" {
			n++
		}
	}
	return n
}

// A message handed back unsent is back in the queue only with its slot:
// handed back in one transaction and refunded in another, it was claimed
// again in between, near the limit, and the refund then took the new
// claim's stamp too (budget_refund.sql finds stamps by message). Issue
// 60's suite run: two numbers of one portfolio reached 252 users under a
// limit of 250. Here A claims with ample room, another connection holds
// the budget's lock while A hands the message back, and B, near the limit,
// claims under that lock as soon as A waits: the window must count B's
// recipient, whichever of the two gets the message.
func TestAMessageHandedBackIsNeverClaimedBeforeItsSlotComesBack(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	oneDueMessage(t, pool)
	a := budgetedRun(t, pool, transport.NewLog(nil))
	batch, _, err := a.claim(context.Background())
	if err != nil || len(batch) != 1 || batch[0].spend == nil {
		t.Fatalf("A claimed %+v (%v); want the message, with ample room", batch, err)
	}
	// Other processes spend 8 more: B sees the window near its limit.
	fixture.Spent(t, pool, "log", time.Now(), 8)
	b := budgetedRun(t, pool, transport.NewLog(nil))
	if !b.budget.tight(b.cfg.Workers * b.cfg.ClaimBatch) {
		t.Fatal("B sees room; the test needs it to claim under the budget's lock")
	}
	claimWhileWaiting(t, pool, b, b.claimArgs(), func() error { return a.release(batch) })
	if used := fixture.Deref(fixture.BudgetOf(t, pool, "log").Used); used != 9 {
		t.Errorf("the window counts %d recipients; want 9: the 8 others and B's", used)
	}
}

// The same for a dead holder's claim: recovery makes the message pending
// and gives back the slot its claim spent, in one transaction. Before, a
// claim made with ample room between the two listed the message too, and
// the refund, which has only the ids after a recovery, took that claim's
// slot as well.
func TestARecoveredMessageIsNeverClaimedBeforeItsSlotComesBack(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	oneDueMessage(t, pool)
	// The Cloud API does not de-duplicate: a claim recovered with no send
	// started goes back pending, not in doubt, and gives its slot back.
	// Nothing is sent here.
	wa, err := transport.NewWhatsApp(transport.WhatsAppConfig{
		BaseURL: "http://127.0.0.1:9", PhoneNumberID: "1234567890", AccessToken: "tok",
		Templates: map[string]transport.WhatsAppTemplate{
			fixture.WeeklyReview.CatalogKey: {Name: "weekly_review_v1", Language: map[string]string{"pt-BR": "pt_BR"}, Params: []string{"count"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	dead := budgetedRun(t, pool, wa)
	if batch, _, err := dead.claim(context.Background()); err != nil || len(batch) != 1 || batch[0].spend == nil {
		t.Fatalf("the dead holder claimed %+v (%v); want the message, with ample room", batch, err)
	}
	fixture.Holder(t, pool, dead.holder, time.Now().Add(-time.Minute))
	recovering, b := budgetedRun(t, pool, wa), budgetedRun(t, pool, wa)
	args := b.claimArgs()
	limit := b.budget.limitNow()
	args.SpendLimit = &limit // with ample room
	claimWhileWaiting(t, pool, b, args, func() error {
		_, err := recovering.recoverAbandoned(context.Background())
		return err
	})
	if used := fixture.Deref(fixture.BudgetOf(t, pool, "whatsapp").Used); used != 1 {
		t.Errorf("the window counts %d recipients; want B's 1", used)
	}
}

// oneDueMessage queues a weekly review (key "m"), due a minute ago, to a
// new user, and returns the user's id and the message's.
func oneDueMessage(t *testing.T, pool *pgxpool.Pool) (user, id string) {
	t.Helper()
	user = fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	id = fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey,
		Params: `{"count":"2"}`, JID: "5511900000001@s.whatsapp.net", ScheduledFor: time.Now().Add(-time.Minute), Key: "m"})
	return user, id
}

// budgetedRun is a run of a processor of its own on tr, one worker
// claiming one message at a time under a daily limit of 10, its budget
// open.
func budgetedRun(t *testing.T, pool *pgxpool.Pool, tr transport.Transport) *run {
	t.Helper()
	proc, err := NewProcessor(pool, ProcessorConfig{Transport: tr, SendInterval: -1, Workers: 1, ClaimBatch: 1,
		DailyLimit: 10, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	p := proc.newRun(func(error) {})
	if p.budget, err = p.openBudget(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// claimWhileWaiting holds the budget's lock on a connection of its own,
// runs handBack beside it until a backend waits on a lock, then claims
// with b's args under the lock (applying the budget near the limit, when
// args spend nothing themselves), lets go, waits for handBack and claims
// again with b. b must end up holding the one message handed back.
func claimWhileWaiting(t *testing.T, pool *pgxpool.Pool, b *run, args claimArgs, handBack func() error) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if err := b.lockBudget(ctx, tx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- handBack() }()
	for deadline := time.Now().Add(30 * time.Second); fixture.WaitingOnLocks(t, pool) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hand-back never waited on the budget's lock")
		}
	}
	got, _, err := b.readClaim(ctx, tx, args)
	if err == nil && args.SpendLimit == nil {
		got, err = b.holdBack(ctx, tx, got)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err == nil {
		err = <-done
	}
	if err != nil {
		t.Fatal(err)
	}
	more, _, err := b.claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if held := append(got, more...); len(held) != 1 {
		t.Fatalf("B holds %d messages; want the one handed back", len(held))
	}
}
