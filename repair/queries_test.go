package repair

import (
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Every statement file is EXPLAINed against a migrated database, so one
// that no longer matches the schema fails here rather than in production.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	id := "00000000-0000-0000-0000-000000000001"
	pgtest.ExplainAll(t, queryFiles, map[string]sqlfile.Args{
		"ops_requeue": {"status": "failed", "ids": []string{id}, "message_type": "goodbye", "reason": nil,
			"error_contains": "HTTP 5", "error_group": nil, "since": time.Now(), "until": time.Now(), "dry_run": false},
		"ops_cancel": {"ids": []string{}, "user_id": id, "message_type": nil, "idempotency_key": "k", "all": false, "dry_run": true},
	})
}
