package pgtest

import (
	"context"
	"io/fs"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// ExplainAll EXPLAINs every statement file of a package (fsys's
// queries/*.sql, as internal/sqlfile loads them) against a migrated
// database, each with its realistic arguments in args, by file name
// without .sql; a file without arguments, or arguments without a file,
// fail the test. internal/sqlfile's test plans every file with NULLs; this
// plans them with the types and values the package passes. It plans in a
// NewTx transaction, each statement in a savepoint of its own.
func ExplainAll(t *testing.T, fsys fs.FS, args map[string]sqlfile.Args) {
	t.Helper()
	tx := NewTx(t)
	ctx := context.Background()
	files, err := fs.Glob(fsys, "queries/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".sql")
		seen[name] = true
		a, ok := args[name]
		if !ok {
			t.Errorf("%s: no arguments in this test", f)
			continue
		}
		sql, err := fs.ReadFile(fsys, f)
		if err != nil {
			t.Fatal(err)
		}
		err = pgx.BeginFunc(ctx, tx, func(tx pgx.Tx) error { // a failure aborts the savepoint only
			_, err := tx.Exec(ctx, "EXPLAIN "+string(sql), a)
			return err
		})
		if err != nil {
			t.Errorf("EXPLAIN %s: %v", f, err)
		}
	}
	for name := range args {
		if !seen[name] {
			t.Errorf("arguments for %s, which is no file of queries/", name)
		}
	}
}

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
