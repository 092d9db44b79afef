package scheduler

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// deadlineCall is a call of one of migration 29's deadline functions as it
// would show in a plan that did not inline it.
var deadlineCall = regexp.MustCompile(`engagement_(inactivity|goodbye|reminder)_due\(`)

// The deadline functions (migration 29) are what every daily statement
// decides by, and they cost nothing: the planner inlines them, as it does
// engagement_in_shard, so each step stays one set-based statement per
// chunk, with no function call per user, and the send ledger is read only
// for a goodbye that failed or was cancelled.
func TestTheDeadlineFunctionsAreInlined(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	asOf := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	steps, err := dailySteps(asOf, Config{SendReminder: true})
	if err != nil {
		t.Fatal(err)
	}
	explainSteps(t, pool, "VERBOSE, COSTS OFF", steps, func(name, kind, plan string) {
		if m := deadlineCall.FindString(plan); m != "" {
			t.Errorf("the %s of step %s calls %s per row: the planner did not inline it\n%s", kind, name, m, plan)
		}
		lazy := "WHEN (q.status = ANY ('{failed,cancelled}'::text[])) THEN CASE WHEN ((COALESCE((SubPlan "
		if name == "goodbye_timeout" && (!strings.Contains(plan, lazy) || strings.Count(plan, "(SubPlan ") != 1) {
			t.Errorf("the %s of step %s does not read the send ledger only for a failed or cancelled goodbye:\n%s", kind, name, plan)
		}
	})
}

// explainSteps EXPLAINs (with options) each step's statement over the
// table's first 8 pages, as a move and as a dry run, and hands check each
// plan with the step's name and the kind ("move", "dry run").
func explainSteps(t *testing.T, pool *pgxpool.Pool, options string, steps []step, check func(name, kind, plan string)) {
	t.Helper()
	ctx := context.Background()
	first, end := pageSpan(0, 8).tids()
	for _, st := range steps {
		for kind, dryRun := range map[string]bool{"move": false, "dry run": true} {
			s := st.move.bind(moveArgs{first: first, end: end, shardIndex: 0, shardCount: 1, runID: ptr(int64(1)), dryRun: dryRun})
			rows, err := pool.Query(ctx, "EXPLAIN ("+options+") "+s.SQL, s.Args...)
			if err != nil {
				t.Fatalf("%s %s: %v", st.name, kind, err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatalf("%s %s: %v", st.name, kind, err)
			}
			check(st.name, kind, strings.Join(lines, "\n"))
		}
	}
}
