package main_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

const asOf = "2026-11-22T06:00:00Z"

var lastWeekOfOctober = time.Date(2026, 10, 25, 12, 0, 0, 0, time.UTC)

func binary(t *testing.T) string { return cmdtest.Build(t, "./cmd/engagement-daily") }

func TestConfigurationErrors(t *testing.T) {
	t.Parallel()
	migrated := pgtest.NewDatabase(t)
	empty := pgtest.NewEmptyDatabase(t)

	tests := []struct {
		name       string
		env        []string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"no database URL", nil, nil, 2, "DATABASE_URL"},
		{"unknown flag", []string{"DATABASE_URL=" + migrated}, []string{"--no-such-flag"}, 2, "unknown flag"},
		{"unparsable as-of", []string{"DATABASE_URL=" + migrated}, []string{"--as-of", "yesterday"}, 2, "--as-of"},
		{"unparsable as-of from the environment", []string{"DATABASE_URL=" + migrated, "ENGAGEMENT_AS_OF=22/11/2026"}, nil, 2, "--as-of"},
		{"unknown output", []string{"DATABASE_URL=" + migrated}, []string{"--output", "xml"}, 2, "--output"},
		{"unexpected argument", []string{"DATABASE_URL=" + migrated}, []string{"now"}, 2, "unknown command"},
		{"unreachable database", []string{"DATABASE_URL=postgres://scheduler:s3cr3t-pw@127.0.0.1:1/engagement?connect_timeout=2"}, nil, 1, "connect to database"},
		{"unmigrated database", []string{"DATABASE_URL=" + empty}, []string{"--as-of", asOf}, 1, "engagementctl migrate up"},
		{"shard out of range", []string{"DATABASE_URL=" + migrated}, []string{"--shard", "3/3"}, 2, "--shard"},
		{"shard not i/N", []string{"DATABASE_URL=" + migrated, "ENGAGEMENT_SHARD=half"}, nil, 2, "--shard"},
		{"shard and shards", []string{"DATABASE_URL=" + migrated, "JOB_COMPLETION_INDEX=0"}, []string{"--shard", "0/3", "--shards", "3"}, 2, "not both"},
		{"shards without an index", []string{"DATABASE_URL=" + migrated}, []string{"--shards", "3"}, 2, "JOB_COMPLETION_INDEX"},
		{"holdout percent over 100", []string{"DATABASE_URL=" + migrated}, []string{"--holdout-percent", "101"}, 2, "--holdout-percent"},
		{"holdout percent below 0", []string{"DATABASE_URL=" + migrated}, []string{"--holdout-percent=-1"}, 2, "--holdout-percent"},
		{"holdout percent not a number", []string{"DATABASE_URL=" + migrated}, []string{"--holdout-percent", "ten"}, 2, "--holdout-percent"},
		{"holdout percent NaN from the environment", []string{"DATABASE_URL=" + migrated, "ENGAGEMENT_HOLDOUT_PERCENT=NaN"}, nil, 2, "--holdout-percent"},
		{"holdout percent not a number from the environment", []string{"DATABASE_URL=" + migrated, "ENGAGEMENT_HOLDOUT_PERCENT=10%"}, nil, 2, "ENGAGEMENT_HOLDOUT_PERCENT"},
		{"empty holdout salt", []string{"DATABASE_URL=" + migrated}, []string{"--holdout-salt", " "}, 2, "--holdout-salt"},
		{"shards with an index past the count", []string{"DATABASE_URL=" + migrated, "JOB_COMPLETION_INDEX=3"}, []string{"--shards", "3"}, 2, "JOB_COMPLETION_INDEX=3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env(tt.env...), tt.args...)
			if res.Code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr: %s", res.Code, tt.wantCode, res.Stderr)
			}
			lines := cmdtest.Lines(res.Stderr)
			if len(lines) != 1 {
				t.Errorf("stderr has %d lines, want one clear line: %q", len(lines), res.Stderr)
			}
			if !strings.Contains(res.Stderr, tt.wantStderr) {
				t.Errorf("stderr %q does not mention %q", res.Stderr, tt.wantStderr)
			}
			for _, leak := range []string{"s3cr3t-pw", "goroutine ", "panic"} {
				if strings.Contains(res.Stderr, leak) {
					t.Errorf("stderr contains %q: %s", leak, res.Stderr)
				}
			}
			if res.Stdout != "" {
				t.Errorf("stdout = %q, want nothing", res.Stdout)
			}
		})
	}
}

func TestJSONSummaryIsTheOnlyOutputOnStdout(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 25, lastWeekOfOctober)

	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), "--as-of", asOf, "--output", "json")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	dec := json.NewDecoder(strings.NewReader(res.Stdout))
	var sum struct {
		Job        string         `json:"job"`
		AsOf       string         `json:"as_of"`
		DryRun     *bool          `json:"dry_run"`
		Processed  *int           `json:"processed"`
		Succeeded  *int           `json:"succeeded"`
		Failed     *int           `json:"failed"`
		Skipped    *int           `json:"skipped"`
		Queued     *int           `json:"queued"`
		Duplicates *int           `json:"duplicates"`
		DurationMS *int           `json:"duration_ms"`
		Steps      map[string]any `json:"steps"`
		Errors     []any          `json:"errors"`
	}
	if err := dec.Decode(&sum); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, res.Stdout)
	}
	if dec.More() {
		t.Errorf("stdout holds more than one JSON value: %s", res.Stdout)
	}
	if sum.Job != "engagement-daily" || sum.AsOf != asOf || sum.DryRun == nil || *sum.DryRun {
		t.Errorf("job %q as_of %q dry_run %v", sum.Job, sum.AsOf, sum.DryRun)
	}
	for name, v := range map[string]*int{"processed": sum.Processed, "succeeded": sum.Succeeded, "failed": sum.Failed,
		"skipped": sum.Skipped, "queued": sum.Queued, "duplicates": sum.Duplicates, "duration_ms": sum.DurationMS} {
		if v == nil {
			t.Errorf("summary lacks %q", name)
		}
	}
	if *sum.Processed != 25 || *sum.Queued != 25 {
		t.Errorf("processed %d queued %d, want 25 each", *sum.Processed, *sum.Queued)
	}
	for _, step := range []string{"inactivity_14d", "goodbye_timeout", "reminder_due"} {
		if _, ok := sum.Steps[step]; !ok {
			t.Errorf("steps lack %q: %v", step, sum.Steps)
		}
	}
	if sum.Errors == nil {
		t.Error(`"errors" is missing or null, want an array`)
	}
	for _, line := range cmdtest.Lines(res.Stderr) {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("log line is not JSON: %q", line)
		}
		if strings.Contains(line, "@s.whatsapp.net") {
			t.Errorf("log line contains a JID: %q", line)
		}
	}
}

func TestFailOnPartial(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 10, lastWeekOfOctober)
	bad := fixture.User(t, pool, fixture.UserOptions{LastActivity: lastWeekOfOctober})
	fixture.Refuse(t, pool, "user_engagement_states", bad)

	// Without the flag, a run with a failed user has completed: exit 0.
	if res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), "--as-of", asOf); res.Code != 0 {
		t.Errorf("exit %d without --fail-on-partial, want 0; stderr: %s", res.Code, res.Stderr)
	}

	// The bad user is still due, and still fails.
	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), "--as-of", asOf, "--output", "json", "--fail-on-partial")
	if res.Code != 3 {
		t.Fatalf("exit %d with --fail-on-partial and a failing user, want 3; stderr: %s", res.Code, res.Stderr)
	}
	var sum struct {
		Failed int `json:"failed"`
		Errors []struct {
			UserID string `json:"user_id"`
			Error  string `json:"error"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatalf("summary: %v", err)
	}
	if sum.Failed != 1 || len(sum.Errors) != 1 || sum.Errors[0].UserID != bad || !strings.Contains(sum.Errors[0].Error, "refusing this user") {
		t.Errorf("summary failed %d errors %+v, want the bad user with its reason", sum.Failed, sum.Errors)
	}
	if !strings.Contains(res.Stderr, `"user_id":"`+bad+`"`) || !strings.Contains(res.Stderr, `"level":"error"`) {
		t.Errorf("the failure is not logged at error level with the user id: %s", res.Stderr)
	}
}

func TestKilledRunLeavesEveryUserWholeAndTheNextRunFinishes(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	const users = 6000
	fixture.InactiveUsers(t, pool, users, lastWeekOfOctober)

	// Small batches make the run long enough to be killed in the middle.
	cmd, _, stderr := cmdtest.Command(bin, cmdtest.Env("DATABASE_URL="+url), "--as-of", asOf, "--batch-size", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for fixture.CountMessages(t, pool, fixture.Messages{}) < 500 {
		if ctx.Err() != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("the run did not get going: %s", stderr)
		}
		time.Sleep(5 * time.Millisecond) // polling for progress, not waiting for time to pass
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The server finishes (and commits) the statement in flight when the
	// client dies; count once its backend is gone.
	for fixture.Backends(t, pool, "engagement-daily") > 0 {
		if ctx.Err() != nil {
			t.Fatal("the killed run's connections did not go away")
		}
		time.Sleep(5 * time.Millisecond)
	}

	moved := fixture.CountStates(t, pool, fixture.States{State: "goodbye_sent"})
	if moved == 0 || moved == users {
		t.Fatalf("%d of %d users moved when killed; the test needs a run killed half-way", moved, users)
	}
	if v := fixture.DailyInvariantViolations(t, pool); v != 0 {
		t.Fatalf("after SIGKILL, %d users are half-moved", v)
	}

	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), "--as-of", asOf, "--output", "json")
	if res.Code != 0 {
		t.Fatalf("re-run exit %d: %s", res.Code, res.Stderr)
	}
	var sum struct{ Processed, Queued, Duplicates int }
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Processed != users-moved || sum.Queued != users-moved || sum.Duplicates != 0 {
		t.Errorf("re-run processed %d queued %d duplicates %d, want exactly the %d left", sum.Processed, sum.Queued, sum.Duplicates, users-moved)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}); n != users {
		t.Errorf("%d goodbyes in all, want one per user (%d)", n, users)
	}
	if v := fixture.DailyInvariantViolations(t, pool); v != 0 {
		t.Errorf("%d users violate the daily invariants", v)
	}
	if n := fixture.CountRuns(t, pool, fixture.Runs{Status: "abandoned"}); n != 1 {
		t.Errorf("%d runs marked abandoned, want the killed one", n)
	}
}

// TestConcurrentProcessesQueueOneGoodbyeEach runs three processes at once:
// a run's lease names its process (host and pid), so runs in one process
// would not show that separate processes wait for each other.
func TestConcurrentProcessesQueueOneGoodbyeEach(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	const users = 5000
	fixture.InactiveUsers(t, pool, users, lastWeekOfOctober)

	var wg sync.WaitGroup
	results := make([]cmdtest.Result, 3)
	for i := range results {
		wg.Go(func() {
			results[i] = cmdtest.Run(t, bin, cmdtest.Env("DATABASE_URL="+url), "--as-of", asOf, "--output", "json", "--batch-size", "500")
		})
	}
	wg.Wait()
	processed := 0
	for i, res := range results {
		if res.Code != 0 {
			t.Fatalf("run %d exit %d: %s", i, res.Code, res.Stderr)
		}
		var sum struct{ Processed int }
		if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
			t.Fatal(err)
		}
		processed += sum.Processed
	}
	if processed != users {
		t.Errorf("the three runs processed %d users together, want %d", processed, users)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Type: "goodbye"}); n != users {
		t.Errorf("%d goodbyes, want one per user (%d)", n, users)
	}
	if n := fixture.CountTransitions(t, pool, fixture.Moves{}); n != users {
		t.Errorf("%d transitions, want one per user (%d)", n, users)
	}
	if n := fixture.CountRuns(t, pool, fixture.Runs{Status: "succeeded"}); n != 3 {
		t.Errorf("%d runs recorded as succeeded, want 3", n)
	}
}

func TestQueueStepRunsWithATransport(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 5, lastWeekOfOctober)

	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), "--as-of", asOf, "--output", "json", "--transport", "log", "--send-interval", "0")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	var sum struct {
		Queued   int `json:"queued"`
		Delivery *struct {
			Transport string `json:"transport"`
			Sent      int    `json:"sent"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Queued != 5 || sum.Delivery == nil || sum.Delivery.Sent != 5 || sum.Delivery.Transport != "log" {
		t.Errorf("summary queued %d delivery %+v, want 5 queued and 5 sent via log", sum.Queued, sum.Delivery)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "sent"}); n != 5 {
		t.Errorf("%d messages sent, want 5", n)
	}
	if strings.Contains(res.Stderr, "@s.whatsapp.net") {
		t.Error("the log transport wrote a JID to the log")
	}

	// Without a transport, or with --skip-send, messages wait for queue-process.
	fixture.InactiveUsers(t, pool, 2, lastWeekOfOctober)
	res = cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), "--as-of", "2026-11-23T06:00:00Z", "--transport", "log", "--skip-send")
	if res.Code != 0 || fixture.CountMessages(t, pool, fixture.Messages{Status: "pending"}) != 2 {
		t.Errorf("--skip-send: exit %d; want the 2 new goodbyes left pending", res.Code)
	}
}

// TestIndexedJobShards runs the binary the way a Kubernetes Indexed Job
// does: --shards 3 and each pod's JOB_COMPLETION_INDEX. Together the three
// pods move every inactive user exactly once.
func TestIndexedJobShards(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 60, lastWeekOfOctober)

	total := 0
	for i, want := range []string{"0/3", "1/3", "2/3"} {
		res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url, "JOB_COMPLETION_INDEX="+strconv.Itoa(i)),
			"--shards", "3", "--as-of", asOf, "--output", "json")
		if res.Code != 0 {
			t.Fatalf("pod %d: exit %d: %s", i, res.Code, res.Stderr)
		}
		var sum struct {
			Shard  string `json:"shard"`
			Queued int    `json:"queued"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
			t.Fatalf("pod %d: stdout is not the JSON summary: %v\n%s", i, err, res.Stdout)
		}
		if sum.Shard != want || sum.Queued == 0 || sum.Queued == 60 {
			t.Errorf("pod %d: shard %q queued %d; want shard %s with a real part of the 60 goodbyes", i, sum.Shard, sum.Queued, want)
		}
		total += sum.Queued
	}
	if total != 60 {
		t.Errorf("the three pods queued %d goodbyes, want each of the 60 users' exactly once", total)
	}
	if n := fixture.CountStates(t, pool, fixture.States{State: "goodbye_sent"}); n != 60 {
		t.Errorf("%d users in goodbye_sent, want 60", n)
	}
}
