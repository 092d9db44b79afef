package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// Explain EXPLAINs each of a package's typed statements (queries.gen.go)
// with the realistic arguments its test binds them to, against a migrated
// database, as ExplainAll does the files: every file of the package's
// queries/ folder (the test's working directory) needs one, and each
// plans in a savepoint of its own in a NewTx transaction.
func Explain(t *testing.T, statements ...sqlfile.Bound) {
	t.Helper()
	tx := NewTx(t)
	ctx := context.Background()
	seen := map[string]bool{}
	for _, s := range statements {
		seen[s.Name] = true
		err := pgx.BeginFunc(ctx, tx, func(tx pgx.Tx) error { // a failure aborts the savepoint only
			_, err := tx.Exec(ctx, "EXPLAIN "+s.SQL, s.Args...)
			return err
		})
		if err != nil {
			t.Errorf("EXPLAIN queries/%s.sql: %v", s.Name, err)
		}
	}
	for _, name := range sqlfile.Names(os.DirFS(".")) {
		if !seen[name] {
			t.Errorf("queries/%s.sql: no arguments in this test", name)
		}
	}
}

// RowsHandled runs s on db under EXPLAIN ANALYZE and returns the rows its
// plan's nodes read: those each produced and those its filters removed,
// once per loop it ran: what the statement did, counted, not timed. A step run again for every row of
// another (an inlined subquery on the inner side of a nested loop) shows
// as its rows times that other's, however fast the machine.
func RowsHandled(t testing.TB, db postgres.Querier, s sqlfile.Bound) int64 {
	t.Helper()
	rows, err := db.Query(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+s.SQL, s.Args...)
	if err != nil {
		t.Fatalf("queries/%s.sql under EXPLAIN ANALYZE: %v", s.Name, err)
	}
	out, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[struct {
		Plans []struct{ Plan planNode } `db:"QUERY PLAN"`
	}])
	if err != nil || len(out.Plans) != 1 {
		t.Fatalf("queries/%s.sql under EXPLAIN ANALYZE: %v (%d plans)", s.Name, err, len(out.Plans))
	}
	plan := out.Plans
	return plan[0].Plan.handled()
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON)'s plan.
// Its counts of rows are means per loop.
type planNode struct {
	Rows         float64    `json:"Actual Rows"`
	Filtered     float64    `json:"Rows Removed by Filter"`
	JoinFiltered float64    `json:"Rows Removed by Join Filter"`
	Rechecked    float64    `json:"Rows Removed by Index Recheck"`
	Loops        float64    `json:"Actual Loops"`
	Plans        []planNode `json:"Plans"`
}

func (n planNode) handled() int64 {
	sum := int64((n.Rows+n.Filtered+n.JoinFiltered+n.Rechecked)*n.Loops + 0.5)
	for _, c := range n.Plans {
		sum += c.handled()
	}
	return sum
}
