package erase

import (
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Every statement is EXPLAINed against a migrated database with the types
// and values the package passes.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	id := "6f1d2c3b-0000-4000-8000-000000000001"
	pgtest.Explain(t,
		eraseFindQuery.Bind(eraseFindArgs{UserID: id}),
		eraseLockQuery.Bind(eraseLockArgs{UserID: id}),
		eraseScrubQuery.Bind(eraseScrubArgs{UserID: id}),
		eraseRecordQuery.Bind(eraseRecordArgs{UserID: id}),
		eraseWishQuery.Bind(eraseWishArgs{UserID: id}),
	)
}
