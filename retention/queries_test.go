package retention

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Every statement file is EXPLAINed against a migrated database, so one
// that no longer matches the schema fails here rather than in production.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	args := map[string]pgx.NamedArgs{
		"cleanup_count":      {"cutoff": time.Now()},
		"cleanup_delete":     {"cutoff": time.Now(), "n": 10},
		"cleanup_count_keys": {"as_of": time.Now()},
	}
	files, err := fs.Glob(queryFiles, "queries/*.sql")
	if err != nil || len(files) != len(args) {
		t.Fatalf("%d query files (%v), want %d", len(files), err, len(args))
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "queries/"), ".sql")
		a, ok := args[name]
		if !ok {
			t.Errorf("%s: no arguments in this test", f)
			continue
		}
		if _, err := pool.Exec(context.Background(), "EXPLAIN "+mustQuery(name), a); err != nil {
			t.Errorf("EXPLAIN %s: %v", f, err)
		}
	}
}
