package scheduler

import (
	"context"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// settingsRow is a row of the settings a batch runs with.
type settingsRow struct{ jit, plans string }

func (r *settingsRow) Dest() []any { return []any{&r.jit, &r.plans} }

// A run's batch statement is planned for its own parameters and not
// JIT-compiled, in its transaction only. With PostgreSQL's default jit =
// on, every chunk's statement was compiled anew (15–30 ms of a 65–100 ms
// statement) where the single-statement reference compiles once: the
// weekly job was 0.86× its reference at 1M users with JIT, 0.70× without
// (docs/BENCHMARKS.md). Nothing outlives the batch, so a transaction
// pooler's next client gets the server's settings back.
func TestABatchRunsWithCustomPlansAndNoJIT(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	serverJIT := fixture.Setting(t, pool, "jit")
	r := &run{pool: pool, fenceKey: lockKey("settings-test", Shard{})}
	settings := sqlfile.Statement[sqlfile.None, settingsRow, *settingsRow]{
		Name: "settings", SQL: `SELECT current_setting('jit'), current_setting('plan_cache_mode')`,
	}
	got, err := batchRow(withFence(ctx, r), pool, settings, sqlfile.None{})
	if err != nil {
		t.Fatal(err)
	}
	if got.jit != "off" || got.plans != "force_custom_plan" {
		t.Errorf("in a batch: jit %q, plan_cache_mode %q; want off and force_custom_plan", got.jit, got.plans)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	jit, plans := fixture.Setting(t, conn, "jit"), fixture.Setting(t, conn, "plan_cache_mode")
	if jit != serverJIT || plans != "auto" {
		t.Errorf("after the batch: jit %q, plan_cache_mode %q; want the server's %q and auto (nothing left on the session)", jit, plans, serverJIT)
	}
}
