package erase

import (
	"testing"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Every statement file is EXPLAINed against a migrated database.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	id := "6f1d2c3b-0000-4000-8000-000000000001"
	pgtest.ExplainAll(t, queryFiles, map[string]sqlfile.Args{
		"erase_find":  {"user_id": id},
		"erase_scrub": {"user_id": id},
	})
}
