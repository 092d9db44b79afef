package sender

import (
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Every statement is EXPLAINed against a migrated database with the types
// and values the package passes, so one that no longer matches the schema
// fails here rather than in production.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pgtest.Explain(t,
		enqueueQuery.Bind(enqueueArgs{UserID: "00000000-0000-0000-0000-000000000001", Type: fixture.Goodbye.Type(),
			Key: fixture.Goodbye.CatalogKey, IdempotencyKey: "k", PeriodStart: &now, ReplayUntil: &now,
			Category: "marketing", Holdout: true}),
		categoriesQuery.Bind(sqlfile.None{}),
		categoryDeclareQuery.Bind(categoryDeclareArgs{MessageType: "support_followup", Category: "utility", DeclaredBy: "ana"}),
		categoryForgetQuery.Bind(categoryForgetArgs{MessageType: "support_followup"}),
	)
}
