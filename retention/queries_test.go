package retention

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
	now, n := time.Now(), int64(10)
	pgtest.Explain(t,
		cleanupCountQuery.Bind(cleanupCountArgs{Cutoff: now}),
		cleanupDeleteQuery.Bind(cleanupDeleteArgs{Cutoff: now, N: n}),
		cleanupCountKeysQuery.Bind(cleanupCountKeysArgs{AsOf: now}),

		cleanupCountFireRequestsQuery.Bind(cleanupCountFireRequestsArgs{Cutoff: now}),
		cleanupDeleteFireRequestsQuery.Bind(cleanupDeleteFireRequestsArgs{Cutoff: now, N: n}),

		cleanupCountTransitionsQuery.Bind(cleanupCountTransitionsArgs{Cutoff: now}),
		cleanupDeleteTransitionsQuery.Bind(cleanupDeleteTransitionsArgs{Cutoff: now, N: n}),
		cleanupCountConsentQuery.Bind(cleanupCountConsentArgs{Cutoff: now}),
		cleanupDeleteConsentQuery.Bind(cleanupDeleteConsentArgs{Cutoff: now, N: n}),
		cleanupCountReceiptsQuery.Bind(cleanupCountReceiptsArgs{Cutoff: now}),
		cleanupDeleteReceiptsQuery.Bind(cleanupDeleteReceiptsArgs{Cutoff: now, N: n}),
		cleanupCountAuditQuery.Bind(cleanupCountAuditArgs{Cutoff: now}),
		cleanupDeleteAuditQuery.Bind(cleanupDeleteAuditArgs{Cutoff: now, N: n}),
		cleanupCountRunsQuery.Bind(cleanupCountRunsArgs{Cutoff: now, Keep: KeepRuns}),
		cleanupDeleteRunsQuery.Bind(cleanupDeleteRunsArgs{Cutoff: now, Keep: KeepRuns, N: n}),
	)
}
