package sender

import (
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Every statement file is EXPLAINed against a migrated database, so one
// that no longer matches the schema fails here rather than in production.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	id := "00000000-0000-0000-0000-000000000001"
	pgtest.ExplainAll(t, queryFiles, map[string]sqlfile.Args{
		"enqueue": {"user_id": id, "type": fixture.Goodbye.Type(), "key": fixture.Goodbye.CatalogKey, "params": nil, "destination": "", "jid": "",
			"scheduled_for": nil, "idempotency_key": "k", "period_start": time.Now(), "replay_until": time.Now()},
	})
}
