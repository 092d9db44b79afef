package poolertest

import (
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// TestMigrateThroughPgBouncerPointsAtMigrateDatabaseURL: migrations need a
// session (golang-migrate holds an advisory lock across statements), so
// engagementctl migrate through a transaction pooler fails with exit 2 and
// one line naming MIGRATE_DATABASE_URL, changing nothing; with
// MIGRATE_DATABASE_URL set to the direct URL (as the Kubernetes migrate Job
// gets it) it migrates while DATABASE_URL still points at the pooler.
func TestMigrateThroughPgBouncerPointsAtMigrateDatabaseURL(t *testing.T) {
	t.Parallel()
	empty := pgtest.NewEmptyDatabase(t)
	pooled := pgtest.NewBouncer(t).URL(t, empty)

	res := cmdtest.Exec(t, engagementctl, cmdtest.Env("DATABASE_URL="+pooled), "migrate", "up")
	lines := cmdtest.Lines(res.Stderr)
	if res.Code != 2 || len(lines) != 1 || !strings.Contains(res.Stderr, "MIGRATE_DATABASE_URL") || !strings.Contains(res.Stderr, "transaction pooler") {
		t.Errorf("migrate up through PgBouncer: exit %d, stderr %q; want exit 2 and one line naming the transaction pooler and MIGRATE_DATABASE_URL", res.Code, res.Stderr)
	}
	res = cmdtest.Exec(t, engagementctl, cmdtest.Env("DATABASE_URL="+empty), "migrate", "version")
	if res.Code != 0 || !strings.HasPrefix(res.Stdout, "schema version 0 ") {
		t.Errorf("after the refused migrate: exit %d, %q %q; want schema version 0", res.Code, res.Stdout, res.Stderr)
	}

	res = cmdtest.Exec(t, engagementctl, cmdtest.Env("DATABASE_URL="+pooled, "MIGRATE_DATABASE_URL="+empty), "migrate", "up")
	if res.Code != 0 {
		t.Fatalf("migrate up with MIGRATE_DATABASE_URL direct: exit %d: %s", res.Code, res.Stderr)
	}
	// The jobs then work through the pooler on the migrated schema.
	runOK(t, "daily", daily, pooled, "--as-of", asOfFlag, "--skip-send")
}
