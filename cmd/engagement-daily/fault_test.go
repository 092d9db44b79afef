package main_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/verify"
)

// The fault tests run on databases seeded alike (3,000 users of every kind:
// about 900 goodbyes to queue, 300 expired goodbyes, 140 reminders due) and
// compare what a disturbed run and its re-run wrote with what one clean run
// wrote. Small batches, one at a time, give each step dozens of batches to
// stop in the middle of.
const (
	faultUsers = 3000
	faultSeed  = 8
	app        = "engagement-daily" // the binary's application_name
)

var faultAsOf = time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)

func seeded(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool, url := pgtest.NewPool(t)
	if _, err := seed.Generate(context.Background(), pool, seed.Options{Users: faultUsers, Seed: faultSeed, AsOf: faultAsOf}); err != nil {
		t.Fatal(err)
	}
	return pool, url
}

func faultArgs(extra ...string) []string {
	return append([]string{"--as-of", faultAsOf.Format(time.RFC3339), "--batch-size", "10", "--concurrency", "1"}, extra...)
}

// cleanRun is what one undisturbed run leaves: the database's outcome, each
// user's, its summary, and how many transitions each step logged.
type cleanRun struct {
	outcome map[string]string
	users   map[string]string
	sum     daySummary
	steps   map[string]int
}

type daySummary struct {
	Processed, Succeeded, Failed, Skipped, Queued, Duplicates int
}

// cleanRuns holds the clean run, made once for every fault test that
// compares with it: the seed and the flags are the same for all.
var cleanRuns struct {
	sync.Mutex
	run *cleanRun
}

// runClean returns what one undisturbed run leaves, running it on its own
// seeded database the first time it is asked for.
func runClean(t *testing.T) cleanRun {
	t.Helper()
	cleanRuns.Lock()
	defer cleanRuns.Unlock()
	if cleanRuns.run == nil {
		c := runCleanOnce(t)
		cleanRuns.run = &c
	}
	return *cleanRuns.run
}

func runCleanOnce(t *testing.T) cleanRun {
	t.Helper()
	pool, url := seeded(t)
	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), faultArgs("--output", "json")...)
	if res.Code != 0 {
		t.Fatalf("clean run: exit %d: %s", res.Code, res.Stderr)
	}
	c := cleanRun{outcome: fixture.Outcome(t, pool), users: fixture.UserOutcomes(t, pool), steps: transitionsByStep(t, pool)}
	if err := json.Unmarshal([]byte(res.Stdout), &c.sum); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"inactivity_14d", "goodbye_timeout", "reminder_due"} {
		if c.steps[step] < 50 {
			t.Fatalf("the clean run moved %d users in step %s; the test needs several batches in each step", c.steps[step], step)
		}
	}
	return c
}

func transitionsByStep(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, step := range []string{"inactivity_14d", "goodbye_timeout", "reminder_due"} {
		out[step] = fixture.CountTransitions(t, pool, fixture.Moves{Trigger: step})
	}
	return out
}

// verify requires every invariant engagementctl verify checks to hold,
// but no_user_stuck after a killed run: the users it did not get to are
// past their deadlines until the re-run (rerunEqualsClean) moves them.
func checkInvariants(t *testing.T, pool *pgxpool.Pool, when string) {
	t.Helper()
	rep, err := verify.Run(context.Background(), pool, verify.Config{AsOf: faultAsOf})
	if err != nil {
		t.Fatalf("verify %s: %v", when, err)
	}
	if !rep.OK {
		for _, c := range rep.Checks {
			if c.Name == verify.CheckNoUserStuck && when != "after the re-run" {
				continue
			}
			if !c.OK {
				t.Errorf("verify %s: %s broken %d times, e.g. %v", when, c.Name, c.Violations, c.Examples)
			}
		}
	}
}

// rerunEqualsClean re-runs the job undisturbed and requires it to exit 0 and
// to leave exactly what one clean run leaves.
func rerunEqualsClean(t *testing.T, url string, pool *pgxpool.Pool, clean cleanRun) {
	t.Helper()
	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), faultArgs()...)
	if res.Code != 0 {
		t.Fatalf("re-run: exit %d: %s", res.Code, res.Stderr)
	}
	fixture.SameOutcome(t, "the disturbed run and its re-run", clean.outcome, fixture.Outcome(t, pool))
	checkInvariants(t, pool, "after the re-run")
}

// TestKilledAtAnyPointTheRerunEndsAsOneCleanRun kills the daily job with
// SIGKILL at three points (half-way through the first step's batches,
// between the first and the second step, half-way through the last step),
// each on its own seeded database; the statement in flight then commits or
// rolls back. Right after the kill every user is either
// untouched or exactly as one clean run leaves them, and the invariants
// hold; the re-run then leaves the same states, messages and transitions as
// one clean run on an identically seeded database.
func TestKilledAtAnyPointTheRerunEndsAsOneCleanRun(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	clean := runClean(t)

	points := []struct {
		name    string
		trigger string // the step whose statement the gate stops
		at      int    // the statement that makes this many of its transitions stops
		// inFlightCommits: after the kill, the server finishes the statement
		// in flight (what it does when the client dies in mid-statement);
		// else that session is ended and the statement rolls back (the host
		// went down with the process).
		inFlightCommits bool
		// want checks the transitions each step logged before the kill.
		want func(got map[string]int) bool
	}{
		{"half-way through the first step", "inactivity_14d", clean.steps["inactivity_14d"] / 2, false, func(got map[string]int) bool {
			return got["inactivity_14d"] > 0 && got["inactivity_14d"] < clean.steps["inactivity_14d"] &&
				got["goodbye_timeout"] == 0 && got["reminder_due"] == 0
		}},
		{"between the first and second steps", "goodbye_timeout", 1, true, func(got map[string]int) bool {
			// The second step's first batch was in flight: it commits or not, as a whole.
			return got["inactivity_14d"] == clean.steps["inactivity_14d"] &&
				got["goodbye_timeout"] <= 10 && got["reminder_due"] == 0
		}},
		{"half-way through the last step", "reminder_due", clean.steps["reminder_due"] / 2, false, func(got map[string]int) bool {
			return got["inactivity_14d"] == clean.steps["inactivity_14d"] && got["goodbye_timeout"] == clean.steps["goodbye_timeout"] &&
				got["reminder_due"] > 0 && got["reminder_due"] < clean.steps["reminder_due"]
		}},
	}
	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			pool, url := seeded(t)
			before := fixture.UserOutcomes(t, pool)
			gate := fixture.Pause(t, pool, "engagement_state_transitions", "trigger = '"+p.trigger+"'", p.at)

			cmd, _, stderr := cmdtest.Command(bin, cmdtest.Env("DATABASE_URL="+url), faultArgs()...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			gate.WaitClosedOn(app, 30*time.Second)
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if strings.Contains(stderr.String(), `"job finished"`) {
				t.Fatalf("the run finished before it was killed: %s", stderr)
			}
			if p.inFlightCommits {
				gate.Open()
			} else {
				fixture.TerminateBackends(t, pool, app)
			}
			fixture.WaitNoBackends(t, pool, app, 30*time.Second)
			gate.Open()
			gate.Remove()

			if got := transitionsByStep(t, pool); !p.want(got) {
				t.Fatalf("killed %s, the steps had logged %v (a clean run logs %v)", p.name, got, clean.steps)
			}
			untouched, finished := fixture.EveryUserWhole(t, before, clean.users, fixture.UserOutcomes(t, pool))
			if untouched == 0 || finished == 0 {
				t.Errorf("after the kill %d users untouched and %d finished; the test needs a run killed part-way", untouched, finished)
			}
			checkInvariants(t, pool, "after the kill")

			rerunEqualsClean(t, url, pool, clean)
			if n := fixture.CountRuns(t, pool, fixture.Runs{Status: "abandoned"}); n != 1 {
				t.Errorf("%d runs marked abandoned, want the killed one", n)
			}
		})
	}
}

// TestTerminatedConnectionsTheBatchIsRetried ends every connection of a
// running daily job with pg_terminate_backend (the batch
// half-way through the first step) as an administrator or a failover
// would. The batch was rolled back; the job tries it again on a new
// connection, finishes (exit 0), records its outcome, and leaves what one
// clean run leaves.
func TestTerminatedConnectionsTheBatchIsRetried(t *testing.T) {
	t.Parallel()
	clean := runClean(t)
	pool, url := seeded(t)
	gate := fixture.Pause(t, pool, "engagement_state_transitions", "trigger = 'inactivity_14d'", clean.steps["inactivity_14d"]/2)

	run := cmdtest.Start(jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), faultArgs("--output", "json")...)
	first := gate.WaitClosedOn(app, 30*time.Second)
	if n := fixture.TerminateBackends(t, pool, app); n < 1 {
		t.Fatalf("terminated %d connections of the job, want the batch's at least (the job's lease lives in a table, not on a connection)", n)
	}
	// The retry comes back to the gate on a new connection.
	gate.WaitClosedOn(app, 30*time.Second, first)
	gate.Open()
	retriedToCleanEnd(t, "its connections were terminated", run, pool, clean)
}

// retriedToCleanEnd waits for a run whose batch lost its connection (after
// what) and requires that it finished (exit 0) having retried the batch,
// with the clean run's summary and outcome, the invariants, and itself
// recorded as succeeded though its lock's session was ended too.
func retriedToCleanEnd(t *testing.T, what string, run *cmdtest.Running, pool *pgxpool.Pool, clean cleanRun) {
	t.Helper()
	res := run.Wait()
	if res.Code != 0 {
		t.Fatalf("the job did not finish after %s (exit %d): %s", what, res.Code, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "retrying it on a new one") {
		t.Errorf("no batch retry is logged after %s: %s", what, res.Stderr)
	}
	var sum daySummary
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatalf("summary: %v: %s", err, res.Stdout)
	}
	if sum != clean.sum {
		t.Errorf("summary %+v, want the clean run's %+v: the lost batch was rolled back and redone", sum, clean.sum)
	}
	fixture.SameOutcome(t, "the run after "+what, clean.outcome, fixture.Outcome(t, pool))
	checkInvariants(t, pool, "after the run")
	if n := fixture.CountRuns(t, pool, fixture.Runs{Status: "succeeded"}); n != 1 {
		t.Errorf("%d runs recorded as succeeded, want this one", n)
	}
}

// TestConnectionsTerminatedOnEveryAttemptExitOneAndTheRerunFinishes ends the
// job's connections every time its batch comes back: after its bounded
// retries the job exits 1 with one clear line (no stack trace, no
// password), no user is half-moved, and the re-run leaves what one clean
// run leaves.
func TestConnectionsTerminatedOnEveryAttemptExitOneAndTheRerunFinishes(t *testing.T) {
	t.Parallel()
	clean := runClean(t)
	pool, dbURL := seeded(t)
	before := fixture.UserOutcomes(t, pool)

	// A password the log and the error must never show (the test server
	// trusts local connections, so any password works).
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-f4ult-pw"
	u.User = url.UserPassword(u.User.Username(), secret)

	gate := fixture.Pause(t, pool, "engagement_state_transitions", "trigger = 'inactivity_14d'", clean.steps["inactivity_14d"]/2)
	run := cmdtest.Start(jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+u.String()), faultArgs()...)
	terminated := map[int]bool{} // the pids the batch came back on
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case <-run.Done():
			break wait
		case <-deadline:
			res := run.Stop()
			t.Fatalf("the job kept retrying after %d terminations: %s", len(terminated), res.Stderr)
		default:
		}
		for _, pid := range gate.Waiting(app) {
			if !terminated[pid] {
				terminated[pid] = true
				fixture.TerminateBackends(t, pool, app)
			}
		}
		time.Sleep(5 * time.Millisecond) // polling for the batch's return, not waiting for time to pass
	}
	res := run.Wait()
	if res.Code != 1 {
		t.Fatalf("exit %d after %d terminations, want 1: %s", res.Code, len(terminated), res.Stderr)
	}
	if len(terminated) != 4 {
		t.Errorf("the batch came back %d times, want 4 attempts", len(terminated))
	}
	lines := cmdtest.Lines(res.Stderr)
	last := cmdtest.Message(lines[len(lines)-1])
	if !strings.HasPrefix(last, "engagement-daily: ") || !strings.Contains(last, "connection was lost 4 times") ||
		!strings.Contains(last, "terminating connection due to administrator command") {
		t.Errorf("last stderr line %q, want one clear line saying the connection was lost", last)
	}
	for _, line := range lines[:len(lines)-1] {
		if !strings.HasPrefix(line, "{") {
			t.Errorf("stderr line %q is neither a JSON log line nor the error", line)
		}
	}
	for _, leak := range []string{secret, "goroutine ", "panic"} {
		if strings.Contains(res.Stderr, leak) {
			t.Errorf("stderr contains %q: %s", leak, res.Stderr)
		}
	}

	gate.Open()
	fixture.WaitNoBackends(t, pool, app, 30*time.Second)
	gate.Remove()
	untouched, finished := fixture.EveryUserWhole(t, before, clean.users, fixture.UserOutcomes(t, pool))
	if untouched == 0 || finished == 0 {
		t.Errorf("after the failed run %d users untouched and %d finished; the test needs a run stopped part-way", untouched, finished)
	}
	checkInvariants(t, pool, "after the failed run")
	if n := fixture.FailedRunsSaying(t, pool, "connection was lost"); n != 1 {
		t.Errorf("%d runs recorded as failed for the lost connection, want 1", n)
	}
	rerunEqualsClean(t, dbURL, pool, clean)
}

// TestPostgresRestartedMidRun restarts the job's PostgreSQL server
// (pg_ctl restart -m fast, which ends every session and refuses connections
// until it is back) while a batch waits, uncommitted, half-way through the
// first step. The batch was rolled back; the job waits, tries it again once
// the server is back, finishes (exit 0), records its outcome and leaves
// exactly what one clean run leaves.
func TestPostgresRestartedMidRun(t *testing.T) {
	t.Parallel()
	clean := runClean(t)
	cluster := pgtest.NewCluster(t)
	pool, err := pgxpool.New(context.Background(), cluster.URL) // not the binaries' pool: the test's fixture and checks
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := seed.Generate(context.Background(), pool, seed.Options{Users: faultUsers, Seed: faultSeed, AsOf: faultAsOf}); err != nil {
		t.Fatal(err)
	}
	gate := fixture.Pause(t, pool, "engagement_state_transitions", "trigger = 'inactivity_14d'", clean.steps["inactivity_14d"]/2)

	run := cmdtest.Start(jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+cluster.URL), faultArgs("--output", "json")...)
	gate.WaitClosedOn(app, 30*time.Second)
	cluster.Restart(t) // ends the gate's session too: the gate is open
	gate.Dropped()
	pool.Reset()
	retriedToCleanEnd(t, "PostgreSQL restarted", run, pool, clean)
}
