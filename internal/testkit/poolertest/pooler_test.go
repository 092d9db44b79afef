package poolertest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The tests run on databases seeded alike: 3,000 users of every kind, so
// every step and message type has work, in small batches so that a run has
// dozens of transactions for the pooler to spread over its server
// connections.
const (
	users    = 3000
	seedNum  = 8
	dailyApp = "engagement-daily" // the daily job's application_name
)

var (
	asOf     = time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)
	asOfFlag = asOf.Format(time.RFC3339)
)

// The binaries' commands, run in process (cmdtest.Exec); the tests of
// separate processes (a kill, concurrent runs) build the binaries.
var (
	daily         = jobcmd.NewDailyCommand
	weekly        = jobcmd.NewWeeklyCommand
	queue         = queuecmd.NewCommand
	engagementctl = ctl.NewCommand
)

func dailyBin(t *testing.T) string { return cmdtest.Build(t, "./cmd/engagement-daily") }
func queueBin(t *testing.T) string { return cmdtest.Build(t, "./cmd/queue-process") }

// seeded returns a pool on a seeded database (direct, for the test's own
// checks) and the database's URLs: direct and through a PgBouncer in
// transaction mode.
func seeded(t *testing.T) (pool *pgxpool.Pool, direct, pooled string) {
	t.Helper()
	direct, pooled = pgtest.NewPooledDatabase(t)
	pool, err := pgxpool.New(context.Background(), direct) // not the binaries' pool: the test's fixture and checks
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := seed.Generate(context.Background(), pool, seed.Options{Users: users, Seed: seedNum, AsOf: asOf}); err != nil {
		t.Fatal(err)
	}
	return pool, direct, pooled
}

func jobArgs(extra ...string) []string {
	return append([]string{"--as-of", asOfFlag, "--batch-size", "50", "--skip-send"}, extra...)
}

// summary is the part of a job's JSON summary the tests compare.
type summary struct {
	Processed, Succeeded, Failed, Skipped, Queued, Duplicates int
	SkipReasons                                               map[string]int `json:"skip_reasons"`
}

func runOK(t *testing.T, what string, newCmd func() *cobra.Command, dbURL string, args ...string) cmdtest.Result {
	t.Helper()
	res := cmdtest.Exec(t, newCmd, cmdtest.Env("DATABASE_URL="+dbURL), args...)
	if res.Code != 0 {
		t.Fatalf("%s through PgBouncer: exit %d: %s", what, res.Code, res.Stderr)
	}
	return res
}

func decode(t *testing.T, what, stdout string) summary {
	t.Helper()
	var s summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("%s: summary: %v: %q", what, err, stdout)
	}
	return s
}

// reference runs daily and weekly directly on a database seeded like the
// others and returns its outcome and the daily summary.
func reference(t *testing.T) (map[string]string, summary) {
	t.Helper()
	pool, direct, _ := seeded(t)
	res := cmdtest.Exec(t, daily, cmdtest.Env("DATABASE_URL="+direct), jobArgs("--output", "json")...)
	if res.Code != 0 {
		t.Fatalf("reference daily run: exit %d: %s", res.Code, res.Stderr)
	}
	if r := cmdtest.Exec(t, weekly, cmdtest.Env("DATABASE_URL="+direct), jobArgs()...); r.Code != 0 {
		t.Fatalf("reference weekly run: exit %d: %s", r.Code, r.Stderr)
	}
	return fixture.Outcome(t, pool), decode(t, "reference daily run", res.Stdout)
}

// TestEveryBinaryThroughPgBouncer (issue 15, item 1): with DATABASE_URL
// pointing at a stock PgBouncer in transaction mode, unchanged, the daily
// and weekly jobs, queue-process (log transport), engagementctl status and
// verify all exit 0, and the jobs leave exactly what they leave connected
// directly. On the old code every binary failed to connect:
// "unsupported startup parameter: statement_timeout".
func TestEveryBinaryThroughPgBouncer(t *testing.T) {
	t.Parallel()
	want, wantSum := reference(t)
	pool, _, pooled := seeded(t)

	res := runOK(t, "daily", daily, pooled, jobArgs("--output", "json")...)
	if got := decode(t, "daily", res.Stdout); got.Processed != wantSum.Processed || got.Queued != wantSum.Queued || got.Skipped != wantSum.Skipped {
		t.Errorf("daily through PgBouncer: %+v, want the direct run's %+v", got, wantSum)
	}
	runOK(t, "weekly", weekly, pooled, jobArgs()...)
	fixture.SameOutcome(t, "the jobs through PgBouncer", want, fixture.Outcome(t, pool))

	pending := fixture.CountMessages(t, pool, fixture.Messages{Status: "pending"})
	if pending == 0 {
		t.Fatal("the jobs queued nothing for queue-process to deliver")
	}
	res = runOK(t, "queue-process", queue, pooled, "--transport", "log", "--send-interval", "0", "--output", "json")
	var q struct{ Processed, Sent int }
	if err := json.Unmarshal([]byte(res.Stdout), &q); err != nil {
		t.Fatalf("queue-process summary: %v: %q", err, res.Stdout)
	}
	if q.Sent != pending {
		t.Errorf("queue-process through PgBouncer sent %d of %d pending messages: %s", q.Sent, pending, res.Stdout)
	}
	notSent := 0
	for status, n := range fixture.SendStatuses(t, pool) {
		if status != "sent" {
			notSent += n
		}
	}
	if notSent != 0 {
		t.Errorf("%d messages are not sent after queue-process", notSent)
	}

	res = runOK(t, "engagementctl status", engagementctl, pooled, "status", "--as-of", asOfFlag)
	if !strings.Contains(res.Stdout, "engagement-daily") || !strings.Contains(res.Stdout, "engagement-weekly") {
		t.Errorf("status through PgBouncer does not list the runs: %s", res.Stdout)
	}
	runOK(t, "engagementctl verify", engagementctl, pooled, "verify", "--as-of", asOfFlag)
}
