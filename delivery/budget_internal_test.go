package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	p, err := NewProcessor(pool, ProcessorConfig{Transport: transport.NewLog(nil), SendInterval: -1, Workers: 1, ClaimBatch: 2,
		DailyLimit: 10, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
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
	batch, err := p.claim(ctx)
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
	p, err := NewProcessor(pool, ProcessorConfig{Transport: transport.NewLog(nil), SendInterval: -1, DailyLimit: 10, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
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
