package main_test

import (
	"encoding/json"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pushtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/syncbuf"
)

// stopDelays are when each round's SIGTERM comes after the binary's first
// instant (cmdtest.Terminate): spread from then (before the database is
// even open) to two seconds, well into the steps of a run in batches of one.
var stopDelays = []time.Duration{
	0, 5 * time.Millisecond, 30 * time.Millisecond, 150 * time.Millisecond,
	500 * time.Millisecond, 1200 * time.Millisecond, 2000 * time.Millisecond,
}

// stopSummary is what the tests read of a job's JSON summary.
type stopSummary struct {
	Job       string `json:"job"`
	RunID     int64  `json:"run_id"`
	Stopped   string `json:"stopped"`
	Processed int    `json:"processed"`
	Succeeded int    `json:"succeeded"`
	Steps     map[string]struct {
		Succeeded int `json:"succeeded"`
	} `json:"steps"`
}

// oneJSONSummary decodes stdout, which must hold exactly one JSON object.
func oneJSONSummary(t *testing.T, stdout string) stopSummary {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var sum stopSummary
	if err := dec.Decode(&sum); err != nil {
		t.Fatalf("stdout %q is not a JSON summary: %v", stdout, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("stdout %q holds more than one JSON object", stdout)
	}
	return sum
}

// lastLine is the last line of s.
func lastLine(s string) string {
	lines := cmdtest.Lines(s)
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// checkStoppedRound requires what a run told to stop must leave: exit 0,
// one JSON summary saying it stopped for a shutdown (or nothing stopped, when
// it had finished first), the run recorded stopped (or succeeded), no
// failed run, and no user half-moved: each is as before the first run
// (before) or as one clean run leaves them (clean).
func checkStoppedRound(t *testing.T, pool *pgxpool.Pool, what string, res cmdtest.Result, before, clean map[string]string) stopSummary {
	t.Helper()
	if res.Code != 0 {
		t.Errorf("%s: exit %d, want 0\nstdout: %s\nstderr: %s", what, res.Code, res.Stdout, lastLine(res.Stderr))
		return stopSummary{}
	}
	sum := oneJSONSummary(t, res.Stdout)
	if sum.Job != app {
		t.Errorf("%s: summary of job %q, want %s", what, sum.Job, app)
	}
	want := "succeeded"
	switch sum.Stopped {
	case "shutdown":
		want = "stopped"
	case "":
	default:
		t.Errorf("%s: stopped %q, want shutdown", what, sum.Stopped)
	}
	if sum.RunID != 0 {
		if run := fixture.RunOf(t, pool, sum.RunID); run.Status != want || run.Error != nil {
			t.Errorf("%s: run %d recorded %s (%v), want %s\n%s", what, sum.RunID, run.Status, run.Error, want, res.Stderr)
		}
	} else if sum.Stopped == "" {
		t.Errorf("%s: a run that did not stop has no run id: %s", what, res.Stdout)
	}
	if n := fixture.CountRuns(t, pool, fixture.Runs{}) - fixture.CountRuns(t, pool, fixture.Runs{Status: "succeeded"}) -
		fixture.CountRuns(t, pool, fixture.Runs{Status: "stopped"}); n != 0 {
		t.Errorf("%s: %d runs recorded other than succeeded or stopped", what, n)
	}
	fixture.EveryUserWhole(t, before, clean, fixture.UserOutcomes(t, pool))
	checkInvariants(t, pool, what)
	return sum
}

// TestSIGTERMStopsTheDailyJobAndTheNextRunDoesTheRest (issue 55, finding 5):
// a SIGTERM anywhere after the first ~10 ms made engagement-daily exit 1
// with {"error": "step inactivity_14d: context canceled"} and record its run
// failed, which fired EngagementJobRunFailed for a platform's ordinary
// stop (the first rounds, before the runtime had a handler, were killed:
// exit 143, no summary). Now, on one seeded database, a run told to stop
// while its batch waits, uncommitted, finishes that batch, counts it and
// stops; then a run is sent SIGTERM at each of stopDelays in turn. Each
// exits 0 with one JSON summary saying it stopped for a shutdown (or
// finished first), its run recorded stopped, no failed run, every user
// untouched or exactly as one clean run leaves them (fixture.EveryUserWhole:
// per user, stricter than DailyInvariantViolations, which on this seed
// also counts the users a clean run moves back to active after an
// undelivered goodbye); the next run does the rest and the database ends
// as one clean run leaves it.
func TestSIGTERMStopsTheDailyJobAndTheNextRunDoesTheRest(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	clean := runClean(t)
	pool, url := seeded(t)
	before := fixture.UserOutcomes(t, pool)
	env := cmdtest.Env("DATABASE_URL=" + url)

	// Told to stop while its batch waits at the gate, uncommitted, in the
	// second step (the first is done by then): the batch in hand is
	// finished, committed and counted, and the run stops after it.
	half := clean.steps["goodbye_timeout"] / 2
	gate := fixture.Pause(t, pool, "engagement_state_transitions", "trigger = 'goodbye_timeout'", half)
	cmd, stdout, _ := cmdtest.Command(bin, env, faultArgs("--output", "json")...)
	stderr := &syncbuf.Buffer{} // read while the binary writes it
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	gate.WaitClosedOn(app, 30*time.Second)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The stop is seen while the batch waits (the log says so), then the
	// batch is let go.
	if _, ok := fixture.PollFor(30*time.Second, func() (bool, bool) {
		return true, strings.Contains(stderr.String(), "told to stop")
	}); !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the job never logged the stop: %s", stderr)
	}
	gate.Open()
	_ = cmd.Wait()
	res := cmdtest.Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
	gate.Remove()
	sum := checkStoppedRound(t, pool, "SIGTERM while a batch waits", res, before, clean.users)
	if sum.Stopped != "shutdown" {
		t.Fatalf("the run stopped while its batch waited says stopped %q, want shutdown", sum.Stopped)
	}
	logged := fixture.CountTransitions(t, pool, fixture.Moves{RunID: sum.RunID, Trigger: "goodbye_timeout"})
	if logged < half || sum.Steps["goodbye_timeout"].Succeeded != logged || logged == clean.steps["goodbye_timeout"] {
		t.Errorf("the stopped run moved %d users in goodbye_timeout (its batch in hand reached %d of %d) and its summary says %d; want the batch in hand finished and counted, and the rest left",
			logged, half, clean.steps["goodbye_timeout"], sum.Steps["goodbye_timeout"].Succeeded)
	}
	if _, ok := sum.Steps["reminder_due"]; ok {
		t.Errorf("the stopped run went on to the next step: %s", res.Stdout)
	}

	// Then a SIGTERM at each of stopDelays, in batches of one so that the
	// rounds stop all along the rest.
	var beforeOpen, midRun int
	for _, delay := range stopDelays {
		what := "SIGTERM " + delay.String() + " after the first instant"
		res := cmdtest.Terminate(t, bin, env, delay, faultArgs("--output", "json", "--batch-size", "1")...)
		sum := checkStoppedRound(t, pool, what, res, before, clean.users)
		switch {
		case sum.Stopped != "" && sum.RunID == 0:
			beforeOpen++
		case sum.Stopped != "" && sum.Processed > 0:
			midRun++
		}
	}
	if beforeOpen == 0 {
		t.Errorf("no round stopped before the run was recorded; the test needs one (the first, at 0 ms)")
	}
	t.Logf("of %d rounds, %d stopped before the run was recorded, %d part-way", len(stopDelays), beforeOpen, midRun)

	rerunEqualsClean(t, url, pool, clean)
}

// TestAStoppedRunIsNoFailureInTheMetrics (issue 55, finding 5): a stopped
// run pushed engagement_job_last_run_failed 1, which fires
// EngagementJobRunFailed. After a completed run, a run told to stop at its
// first instant (before its database is open) pushes
// engagement_job_last_run_failed 0 and its stop's timestamp, and keeps the
// completed run's last success: a stop is no failure, and no success.
func TestAStoppedRunIsNoFailureInTheMetrics(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 5, lastWeekOfOctober)
	env := cmdtest.Env("DATABASE_URL="+url, "PUSHGATEWAY_URL="+gw.URL)
	bin := binary(t)

	if res := cmdtest.Run(t, bin, env, "--as-of", asOf); res.Code != 0 {
		t.Fatalf("the completed run: exit %d: %s", res.Code, res.Stderr)
	}
	job := []string{"job", app}
	lastSuccess, ok := gw.Metrics(t, "engagement_").Value(metrics.JobLastSuccess, job...)
	if !ok {
		t.Fatal("the completed run pushed no last success")
	}

	res := cmdtest.Terminate(t, bin, env, 0, "--as-of", asOf, "--output", "json")
	if res.Code != 0 {
		t.Fatalf("the stopped run: exit %d, want 0\nstdout: %s\nstderr: %s", res.Code, res.Stdout, res.Stderr)
	}
	if sum := oneJSONSummary(t, res.Stdout); sum.Stopped != "shutdown" {
		t.Fatalf("the run stopped at its first instant says stopped %q, want shutdown", sum.Stopped)
	}
	got := gw.Metrics(t, "engagement_")
	wantSample(t, got, 0, metrics.JobLastRunFailed, job...)
	wantSample(t, got, lastSuccess, metrics.JobLastSuccess, job...)
	if _, ok := got.Value(metrics.JobLastStopped, job...); !ok {
		t.Errorf("no %s after the stopped run; the gateway has:\n%s", metrics.JobLastStopped, got)
	}
}
