package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 24: a daily run whose statements hit statement_timeout (behind a
// lock a plain CREATE INDEX holds) exited 0 reporting "failed users" with
// empty user ids. The timeout is no fault of any user's: the run splits the
// batch (a smaller one may fit) and, when a single row still times out,
// stops with exit 1 and a precise line, and no user is reported failed.
func TestAStatementLimitEndsTheRunNotAUser(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	ctx := context.Background()
	for range 5 {
		fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now().Add(-30 * 24 * time.Hour)})
	}
	// CREATE INDEX (not CONCURRENTLY) holds SHARE on the table: updates wait.
	indexer, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer indexer.Rollback(ctx) //nolint:errcheck // the test's end
	fixture.LockStatesShare(t, indexer)

	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url+"&statement_timeout=100"), "--output", "json")
	if res.Code != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1", res.Code, res.Stdout, res.Stderr)
	}
	lines := cmdtest.Lines(res.Stderr)
	if last := cmdtest.Message(lines[len(lines)-1]); !strings.Contains(last, "hit a limit") || !strings.Contains(last, "57014") {
		t.Errorf("last stderr line %q, want the limit named", last)
	}
	if strings.Contains(res.Stderr, "user failed") {
		t.Errorf("users reported failed for a timeout: %s", res.Stderr)
	}
	_ = indexer.Rollback(ctx)
	if n := fixture.CountStates(t, pool, fixture.States{}) - fixture.CountStates(t, pool, fixture.States{State: "active"}); n != 0 {
		t.Errorf("%d users moved behind the lock, want none", n)
	}
}
