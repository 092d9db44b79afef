package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/engagement-scheduler/engagement/internal/fixture"
	"github.com/engagement-scheduler/engagement/internal/pgtest"
)

// A user selected as inactive whom the bot brings back before the batch
// runs must be skipped, not moved and not failed.
func TestMoveSkipsUserWhoseStateChanged(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	asOf := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour)})

	steps, err := dailySteps()
	if err != nil {
		t.Fatal(err)
	}
	inactivity := steps[0]
	args := withArgs(pgx.NamedArgs{
		"as_of":              asOf,
		"inactive_before":    asOf.Add(-14 * 24 * time.Hour),
		"goodbye_expires_at": asOf.Add(48 * time.Hour),
		"key_suffix":         ":goodbye_sent:2026-11-22",
		"run_id":             int64(0),
	}, inactivity.args)
	cands, err := selectCandidates(ctx, pool, inactivity, args)
	if err != nil || len(cands.ids) != 1 {
		t.Fatalf("selection found %d users (%v), want the one inactive user", len(cands.ids), err)
	}

	// The user writes to the bot between the selection and the move.
	if _, err := pool.Exec(ctx, `UPDATE user_engagement_states SET last_activity_at = $2 WHERE user_id = $1`, user, asOf); err != nil {
		t.Fatal(err)
	}
	b := batcher{move: func(ctx context.Context, ids []pgtype.UUID) (int, int, error) {
		var moved, queued int
		err := pool.QueryRow(ctx, inactivity.moveSQL, batchExecMode, withArgs(args, pgx.NamedArgs{"user_ids": ids})).Scan(&moved, &queued)
		return moved, queued, err
	}}
	if err := b.moveIsolating(ctx, cands.ids); err != nil {
		t.Fatal(err)
	}
	if b.moved != 0 || b.queued != 0 || len(b.failures) != 0 {
		t.Errorf("moved %d queued %d failed %d, want the changed user skipped", b.moved, b.queued, len(b.failures))
	}
	if st := fixture.StateOf(t, pool, user).State; st != "active" {
		t.Errorf("state = %q, want active", st)
	}
}
