package main_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestSIGTERMStopsTheWeeklyJobAndTheNextRunDoesTheRest (issue 55, finding
// 5): a SIGTERM made engagement-weekly exit 1 ("step weekly_review: context
// canceled") and record its run failed. On one database, a run is sent
// SIGTERM at each delay after its first instant (cmdtest.Terminate), from
// before the database is open to two seconds into its batches (of one
// user each): each exits 0 with one JSON summary saying it stopped for a
// shutdown (or finished first), its run recorded stopped, no review queued
// twice; the next run queues the rest, and the one after that nothing.
// Before the fix the first round was killed (exit 143, no summary) and the
// others exited 1 with their runs recorded failed.
func TestSIGTERMStopsTheWeeklyJobAndTheNextRunDoesTheRest(t *testing.T) {
	t.Parallel()
	bin := cmdtest.Build(t, "./cmd/engagement-weekly")
	pool, url := mondayMorning(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	args := []string{"--as-of", faultAsOf.Format(time.RFC3339), "--batch-size", "1", "--concurrency", "1", "--output", "json"}

	type summary struct {
		Job     string `json:"job"`
		RunID   int64  `json:"run_id"`
		Stopped string `json:"stopped"`
		Queued  int    `json:"queued"`
	}
	queued, stopped := 0, 0
	for _, delay := range []time.Duration{0, 20 * time.Millisecond, 200 * time.Millisecond, 800 * time.Millisecond, 2000 * time.Millisecond} {
		what := "SIGTERM " + delay.String() + " after the first instant"
		res := cmdtest.Terminate(t, bin, env, delay, args...)
		if res.Code != 0 {
			t.Errorf("%s: exit %d, want 0\nstdout: %s\nstderr: %s", what, res.Code, res.Stdout, res.Stderr)
			continue
		}
		dec := json.NewDecoder(strings.NewReader(res.Stdout))
		var sum summary
		if err := dec.Decode(&sum); err != nil {
			t.Fatalf("%s: stdout %q is not a JSON summary: %v", what, res.Stdout, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Errorf("%s: stdout %q holds more than one JSON object", what, res.Stdout)
		}
		want := "succeeded"
		if sum.Stopped != "" {
			want = "stopped"
			stopped++
		}
		if sum.Job != app || (sum.Stopped != "" && sum.Stopped != "shutdown") {
			t.Errorf("%s: summary %+v, want %s stopped for a shutdown or not at all", what, sum, app)
		}
		if sum.RunID != 0 {
			if status := fixture.RunStatus(t, pool, sum.RunID); status != want {
				t.Errorf("%s: run %d recorded %s, not %s", what, sum.RunID, status, want)
			}
		}
		if n := runsNeitherSucceededNorStopped(t, pool, app); n != 0 {
			t.Errorf("%s: %d runs recorded other than succeeded or stopped", what, n)
		}
		queued += sum.Queued
		if got := reviews(t, pool); got != queued {
			t.Errorf("%s: %d reviews queued, the summaries say %d", what, got, queued)
		}
		if n := usersWithTwoReviews(t, pool); n != 0 {
			t.Errorf("%s: %d users have two reviews", what, n)
		}
		checkInvariants(t, pool, what)
	}
	if stopped == 0 {
		t.Errorf("no round stopped; the test needs them to")
	}

	// The next run does what the stopped ones left (if anything), the one
	// after it finds nothing left.
	for i := range 2 {
		res := cmdtest.Run(t, bin, env, args...)
		var sum summary
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &sum) != nil || sum.Stopped != "" {
			t.Fatalf("run %d after the stops: exit %d, %s: %s", i+1, res.Code, res.Stdout, res.Stderr)
		}
		if i == 1 && sum.Queued != 0 {
			t.Errorf("the second run after the stops queued %d reviews; the first should have done the rest", sum.Queued)
		}
		queued += sum.Queued
	}
	if got := reviews(t, pool); got != queued || queued < 200 {
		t.Errorf("%d reviews queued in all, the summaries say %d; want every one once (hundreds)", got, queued)
	}
	checkInvariants(t, pool, "after the runs that did the rest")
}

// runsNeitherSucceededNorStopped counts job's runs recorded in any other
// status.
func runsNeitherSucceededNorStopped(t *testing.T, pool *pgxpool.Pool, job string) int {
	t.Helper()
	n := 0
	for _, r := range fixture.RunsOfJob(t, pool, job) {
		if r.Status != "succeeded" && r.Status != "stopped" {
			n++
		}
	}
	return n
}

// usersWithTwoReviews counts the users with more than one weekly review
// queued.
func usersWithTwoReviews(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	perUser := map[string]int{}
	n := 0
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Type: "weekly_review"}) {
		if perUser[m.UserID]++; perUser[m.UserID] == 2 {
			n++
		}
	}
	return n
}
