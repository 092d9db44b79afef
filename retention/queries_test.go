package retention

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
	pgtest.ExplainAll(t, queryFiles, map[string]sqlfile.Args{
		"cleanup_count":      {"cutoff": time.Now()},
		"cleanup_delete":     {"cutoff": time.Now(), "n": 10},
		"cleanup_count_keys": {"as_of": time.Now()},

		"cleanup_count_fire_requests":  {"cutoff": time.Now()},
		"cleanup_delete_fire_requests": {"cutoff": time.Now(), "n": 10},

		"cleanup_count_transitions":  {"cutoff": time.Now()},
		"cleanup_delete_transitions": {"cutoff": time.Now(), "n": 10},
		"cleanup_count_consent":      {"cutoff": time.Now()},
		"cleanup_delete_consent":     {"cutoff": time.Now(), "n": 10},
	})
}
