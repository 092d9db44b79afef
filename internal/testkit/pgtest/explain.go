package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

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
