package repair

import (
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Every statement is EXPLAINed against a migrated database with the types
// and values the package passes, so one that no longer matches the schema
// fails here rather than in production.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	id, key, goodbye, now := "00000000-0000-0000-0000-000000000001", "k", "goodbye", time.Now()
	pgtest.Explain(t,
		opsRequeueQuery.Bind(opsRequeueArgs{Status: "failed", IDs: []string{id}, MessageType: &goodbye,
			ErrorContains: new("HTTP 5"), Since: &now, Until: &now}),
		opsCancelQuery.Bind(opsCancelArgs{IDs: []string{}, UserID: &id, IdempotencyKey: &key, DryRun: true}),
	)
}
