package repair

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
	id := "00000000-0000-0000-0000-000000000001"
	args := map[string]pgx.NamedArgs{
		"ops_requeue": {"status": "failed", "ids": []string{id}, "message_type": "goodbye", "reason": nil,
			"error_contains": "HTTP 5", "since": time.Now(), "until": time.Now(), "dry_run": false},
		"ops_cancel": {"ids": []string{}, "user_id": id, "message_type": nil, "idempotency_key": "k", "all": false, "dry_run": true},
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
