package idempotency

import (
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Every statement is EXPLAINed against a migrated database with the types
// and values the store passes, so one that no longer matches the schema
// fails here rather than in production.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pgtest.Explain(t,
		checkQuery.Bind(checkArgs{Key: "k", Now: now, ExpiresAt: now.Add(time.Hour)}),
		storeResultQuery.Bind(storeResultArgs{Key: "k", Result: []byte("r"), Now: now, ExpiresAt: now.Add(time.Hour)}),
		getResultQuery.Bind(getResultArgs{Key: "k", Now: now}),
		forgetQuery.Bind(forgetArgs{Key: "k"}),
		deleteExpiredQuery.Bind(deleteExpiredArgs{Before: now, Batch: DefaultDeleteBatch}),
	)
}
