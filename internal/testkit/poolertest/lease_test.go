package poolertest

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/syncbuf"
	"github.com/engagement-scheduler/engagement/scheduler"
)

func faultArgs(extra ...string) []string {
	return append([]string{"--as-of", asOfFlag, "--batch-size", "10", "--concurrency", "1", "--skip-send"}, extra...)
}

// cleanDaily runs the daily job once, undisturbed and directly, on a
// database seeded like the others, and returns its outcome and summary.
func cleanDaily(t *testing.T) (map[string]string, summary) {
	t.Helper()
	pool, direct, _ := seeded(t)
	res := cmdtest.Exec(t, daily, cmdtest.Env("DATABASE_URL="+direct), faultArgs("--output", "json")...)
	if res.Code != 0 {
		t.Fatalf("clean run: exit %d: %s", res.Code, res.Stderr)
	}
	return fixture.Outcome(t, pool), decode(t, "clean run", res.Stdout)
}

// TestThreeConcurrentRunsThroughPgBouncer: three daily runs started at once
// through PgBouncer all exit 0, one does the work while the others wait for
// it and then find nothing left, and together they leave what one clean run
// leaves. On the old code one hung forever on the session advisory lock and
// one failed ("bind message supplies 5 parameters, but prepared statement
// "" requires 3").
func TestThreeConcurrentRunsThroughPgBouncer(t *testing.T) {
	t.Parallel()
	want, wantSum := cleanDaily(t)
	pool, _, pooled := seeded(t)
	bin := dailyBin(t)

	var wg sync.WaitGroup
	results := make([]cmdtest.Result, 3)
	for i := range results {
		wg.Go(func() {
			results[i] = cmdtest.Run(t, bin, cmdtest.Env("DATABASE_URL="+pooled), faultArgs("--output", "json")...)
		})
	}
	wg.Wait()
	processed, waited := 0, 0
	for i, res := range results {
		if res.Code != 0 {
			t.Fatalf("concurrent run %d through PgBouncer: exit %d: %s", i, res.Code, res.Stderr)
		}
		processed += decode(t, fmt.Sprintf("run %d", i), res.Stdout).Processed
		if strings.Contains(res.Stderr, "waiting for it to finish") {
			waited++
		}
	}
	if processed != wantSum.Processed {
		t.Errorf("the three runs processed %d users in all, want one clean run's %d", processed, wantSum.Processed)
	}
	if waited < 2 {
		t.Errorf("%d runs waited for another; want two of three", waited)
	}
	fixture.SameOutcome(t, "three concurrent runs through PgBouncer", want, fixture.Outcome(t, pool))
	if n := fixture.CountRuns(t, pool, fixture.Runs{Status: "succeeded"}); n != 3 {
		t.Errorf("%d runs recorded as succeeded, want 3", n)
	}
}

// TestKilledRunThroughPgBouncerTheRerunTakesOverAtOnce (issue 15, item 3):
// the daily job, through PgBouncer, is killed with SIGKILL while a batch
// waits uncommitted on the server (the statement goes on after the client
// is gone). A re-run started right away takes the lease over at once (the
// killed process is gone), cancels the killed run's statement before it
// starts (so it neither waits for that batch's row locks nor reports its
// users as changed under it: the report had 4,151 users state_changed), and
// leaves what one clean run leaves. The old code could not run through
// PgBouncer at all; directly, its re-run overlapped the killed statement.
func TestKilledRunThroughPgBouncerTheRerunTakesOverAtOnce(t *testing.T) {
	t.Parallel()
	want, wantSum := cleanDaily(t)
	pool, _, pooled := seeded(t)
	bin := dailyBin(t)

	// The gate stops only the first run's statements: the re-run's rows
	// carry another run id, and the killed run's committed rows are fewer
	// than the gate's count.
	gate := fixture.Pause(t, pool, "engagement_state_transitions",
		"trigger = 'inactivity_14d' AND job_run_id = (SELECT min(id) FROM engagement_job_runs)", 200)
	cmd, _, stderr := cmdtest.Command(bin, cmdtest.Env("DATABASE_URL="+pooled), faultArgs()...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := gate.WaitClosedOn(dailyApp, time.Minute)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if strings.Contains(stderr.String(), `"job finished"`) {
		t.Fatalf("the run finished before it was killed: %s", stderr)
	}
	if !fixture.PoolerBackendExists(t, pool, killed) {
		t.Fatal("the killed run's statement is not running on the server any more; the test needs it running")
	}

	res := cmdtest.Run(t, bin, cmdtest.Env("DATABASE_URL="+pooled), faultArgs("--output", "json")...)
	if res.Code != 0 {
		t.Fatalf("re-run through PgBouncer: exit %d: %s", res.Code, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "taking over") || !strings.Contains(res.Stderr, "cancelled the abandoned run's statements") {
		t.Errorf("the re-run did not log taking over the lease and cancelling the killed run's statement: %s", res.Stderr)
	}
	if strings.Contains(res.Stderr, "waiting for it to finish") {
		t.Errorf("the re-run waited for the killed run's lease to time out; its process was gone: %s", res.Stderr)
	}
	got := decode(t, "re-run", res.Stdout)
	for _, reason := range []string{"state_changed", "locked"} {
		if got.SkipReasons[reason] > wantSum.SkipReasons[reason] {
			t.Errorf("the re-run skipped %d users as %s (a clean run: %d): it overlapped the killed run's statement",
				got.SkipReasons[reason], reason, wantSum.SkipReasons[reason])
		}
	}
	gate.Open()
	fixture.SameOutcome(t, "the killed run and its re-run through PgBouncer", want, fixture.Outcome(t, pool))
	if n := fixture.CountRuns(t, pool, fixture.Runs{Status: "abandoned"}); n != 1 {
		t.Errorf("%d runs marked abandoned, want the killed one", n)
	}
}

// TestLeaseOfAnotherMachineIsTakenOverWhenItsHeartbeatStops: a run in
// progress on another machine (its pid cannot be checked from here) keeps
// the lease while its heartbeat is fresh: a run through PgBouncer waits.
// Once the heartbeat is older than the lease timeout, the waiting run marks
// it abandoned and does the work. Time moves through the heartbeat column
// (the database clock's input), not by sleeping out the timeout.
func TestLeaseOfAnotherMachineIsTakenOverWhenItsHeartbeatStops(t *testing.T) {
	t.Parallel()
	pool, _, pooled := seeded(t)
	ctx := t.Context()
	other := fixture.PoolerForeignRun(t, pool, asOf)
	jobs, err := postgres.Open(ctx, pooled, "engagement-daily")
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.Close()

	var logs syncbuf.Buffer
	done := make(chan error, 1)
	var sum *scheduler.Summary
	go func() {
		var err error
		sum, err = scheduler.RunDaily(ctx, jobs, scheduler.Config{AsOf: asOf, BatchSize: 100, LeaseTimeout: 10 * time.Minute, Logger: zerolog.New(&logs)})
		done <- err
	}()
	if _, ok := fixture.PollFor(time.Minute, func() (bool, bool) { return true, strings.Contains(logs.String(), "waiting for it to finish") }); !ok {
		t.Fatalf("the run did not wait for the live run of another machine: %s", logs.String())
	}
	if n := fixture.CountTransitions(t, pool, fixture.Moves{}); n != 0 {
		t.Fatalf("the run moved %d users while another run held the lease", n)
	}
	// Ten minutes and a second pass without a heartbeat.
	fixture.PoolerAgeHeartbeat(t, pool, other, 601*time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the run after the takeover: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the run did not take over a lease whose heartbeat stopped")
	}
	if sum.Processed == 0 {
		t.Error("the run that took over processed nobody")
	}
	run := fixture.RunOf(t, pool, other)
	if reason := fixture.Deref(run.Error); run.Status != "abandoned" || !strings.Contains(reason, "no heartbeat") {
		t.Errorf("the silent run is %q (%q), want abandoned for its missing heartbeat", run.Status, reason)
	}
}
