package sqlfile_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// moduleRoot is the repository's root, two folders up from this package.
const moduleRoot = "../.."

// positional matches a positional parameter, $1.
var positional = regexp.MustCompile(`\$(\d+)`)

// Every statement file of every package (each package's queries/*.sql) is
// prepared and EXPLAINed against a migrated database, so a statement that no
// longer matches the schema (a missing table, column or function, a type
// mismatch) fails CI. Named parameters are bound as pgx.StrictNamedArgs binds
// them ($1, $2, … in order of first use), positional ones are kept; their
// types are inferred by the server, as when the packages run them, and the
// plan is made for NULL values.
func TestEveryStatementFilePlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := pgtest.NewTx(t)

	var files []string
	err := filepath.WalkDir(moduleRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "bench" || strings.HasPrefix(d.Name(), ".")) && p != moduleRoot {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".sql") && filepath.Base(filepath.Dir(p)) == "queries" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	packages := map[string]int{}
	for _, f := range files {
		packages[filepath.Dir(filepath.Dir(f))]++
	}
	for _, pkg := range []string{"scheduler", "sender", "activity"} {
		if packages[filepath.Join(moduleRoot, pkg)] == 0 {
			t.Errorf("no statement files found in %s/queries: the walk is broken", pkg)
		}
	}

	for _, f := range files {
		rel, _ := filepath.Rel(moduleRoot, f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Positional parameters, one per distinct name, as pgx binds them.
		sql, args, err := pgx.NamedArgs{}.RewriteQuery(ctx, tx.Conn(), string(b), nil)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		params := len(args)
		for _, m := range positional.FindAllStringSubmatch(sql, -1) {
			n, _ := strconv.Atoi(m[1])
			params = max(params, n)
		}
		nulls := strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ")
		explain := "EXPLAIN EXECUTE statement_file"
		if params > 0 {
			explain += " (" + nulls + ")"
		}
		// Each file in a savepoint: a failure aborts it, not the test's
		// transaction. A prepared statement outlives a rollback, so it is
		// deallocated whatever happens.
		prepared := false
		err = pgx.BeginFunc(ctx, tx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "PREPARE statement_file AS "+sql, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("%s does not match the schema: %w", rel, err)
			}
			prepared = true
			if _, err := tx.Exec(ctx, explain, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("EXPLAIN %s: %w", rel, err)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		if prepared {
			if _, err := tx.Exec(ctx, "DEALLOCATE statement_file", pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("planned %d statement files in %d packages", len(files), len(packages))
}
