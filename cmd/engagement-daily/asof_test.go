package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 23, point 2: --as-of 2030 was accepted without a word; its dry run
// would have queued goodbyes to 1,210 of 3,000 users. An as-of beyond the
// clock skew allowed is exit 2 before any work, unless
// --allow-future-as-of says the simulation is meant; within the skew it
// runs.
func TestAFutureAsOfNeedsItsFlag(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now().Add(-10 * 24 * time.Hour)})
	env := cmdtest.Env("DATABASE_URL=" + url)

	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, env, "--as-of", "2030-01-01T06:00:00Z")
	if res.Code != 2 || !strings.Contains(cmdtest.Message(res.Stderr), "--allow-future-as-of") {
		t.Fatalf("--as-of 2030: exit %d, stderr %q; want exit 2 naming --allow-future-as-of", res.Code, res.Stderr)
	}
	if n := fixture.CountRuns(t, pool, fixture.Runs{}) + fixture.CountMessages(t, pool, fixture.Messages{}) +
		fixture.CountStates(t, pool, fixture.States{}) - fixture.CountStates(t, pool, fixture.States{State: "active"}); n != 0 {
		t.Errorf("the refused run wrote %d rows, want none", n)
	}
	res = cmdtest.Exec(t, jobcmd.NewDailyCommand, env, "--as-of", "2030-01-01T06:00:00Z", "--allow-future-as-of", "--dry-run", "--output", "json")
	if res.Code != 0 || !strings.Contains(res.Stdout, `"queued":1`) {
		t.Errorf("--allow-future-as-of --dry-run: exit %d, stdout %q; want the simulation to find the user", res.Code, res.Stdout)
	}
	skewed := time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)
	if res = cmdtest.Exec(t, jobcmd.NewDailyCommand, env, "--as-of", skewed, "--dry-run"); res.Code != 0 {
		t.Errorf("--as-of 2 minutes ahead (clock skew): exit %d, stderr %q; want it accepted", res.Code, res.Stderr)
	}
	res = cmdtest.Exec(t, jobcmd.NewWeeklyCommand, env, "--as-of", "2030-01-01T06:00:00Z")
	if res.Code != 2 {
		t.Errorf("engagement-weekly --as-of 2030: exit %d, want 2", res.Code)
	}
}
