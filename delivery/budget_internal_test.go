package delivery

import (
	"context"
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
	fixture.Exec(t, pool, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for, idempotency_key)
		SELECT $1, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual',
		       '55119' || i || '@s.whatsapp.net', now() - (3 - i) * interval '1 minute', 'race-' || i
		  FROM generate_series(1, 2) AS i`, user)
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
	fixture.Exec(t, pool, `
		INSERT INTO engagement_send_budget_claims (transport, spent_at, recipients) VALUES ('log', now(), 9);
		UPDATE engagement_send_budgets SET used = 9 WHERE transport = 'log'`)
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
	var used, claims, stamps, waiting int
	if err := pool.QueryRow(ctx, `
		SELECT (SELECT used FROM engagement_send_budgets WHERE transport = 'log'),
		       (SELECT count(*) FROM engagement_send_budget_claims),
		       (SELECT count(*) FROM engagement_send_budget_recipients),
		       (SELECT count(*) FROM engagement_message_queue WHERE status = 'pending' AND deferred_reason = 'budget')`,
	).Scan(&used, &claims, &stamps, &waiting); err != nil {
		t.Fatal(err)
	}
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
	fixture.Exec(t, pool, `
		INSERT INTO engagement_send_budgets (transport, daily_limit, used) VALUES ('log', 10, 8);
		INSERT INTO engagement_send_budget_claims (transport, spent_at, recipients)
		VALUES ('log', now() - interval '25 hours', 3), ('log', now() - interval '1 hour', 5)`)
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
	if used := fixture.Count(t, pool, `SELECT used FROM engagement_send_budgets WHERE transport = 'log'`); used != 5 || p.budget.used.Load() != 5 {
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
	// The window is full (2 of 2): two recipients claimed 23 h 59 min ago,
	// so the first slot frees in a minute.
	fixture.Exec(t, pool, `
		INSERT INTO engagement_send_budgets (transport, daily_limit, used) VALUES ('log', 2, 2);
		INSERT INTO engagement_send_budget_recipients (transport, recipient, spent_at)
		VALUES ('log', md5('a')::uuid, now() - interval '23 hours 59 minutes'),
		       ('log', md5('b')::uuid, now() - interval '23 hours 59 minutes')`)
	fixture.Exec(t, pool, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for, idempotency_key, deferred_reason)
		SELECT $1, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual',
		       '5511' || k || '@s.whatsapp.net', now() + at, k, 'budget'
		  FROM (VALUES ('head', interval '-1 second'), ('w1', interval '10 seconds'), ('locked', interval '15 seconds'),
		               ('w2', interval '20 seconds'), ('w3', interval '30 seconds'), ('later', interval '2 hours')) AS v(k, at)`, user)
	before := scheduled(t, pool)

	// Another transaction holds one of the waiting messages.
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx) //nolint:errcheck // a test's
	if _, err := other.Exec(ctx, `SELECT FROM engagement_message_queue WHERE idempotency_key = 'locked' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

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
	if n := fixture.Count(t, pool, `SELECT count(*) FROM engagement_message_queue WHERE status = 'pending' AND deferred_reason = 'budget'`); n != 6 {
		t.Errorf("%d messages waiting on the budget, want all 6", n)
	}
}

// scheduled is each queued message's due time, by idempotency key.
func scheduled(t *testing.T, pool *pgxpool.Pool) map[string]time.Time {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT idempotency_key, scheduled_for FROM engagement_message_queue`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	var k string
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&k, &at}, func() error { out[k] = at; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
