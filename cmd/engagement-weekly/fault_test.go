package main_test

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/verify"
)

const app = "engagement-weekly" // the binary's application_name

// faultAsOf is a Monday morning: the daily job has run, the weekly one runs.
var faultAsOf = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

// mondayMorning is a database seeded with 3,000 users (the same rows every
// time) after that morning's daily run: about 1,200 weekly reviews to queue.
func mondayMorning(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	pool, url := pgtest.NewPool(t)
	if _, err := seed.Generate(ctx, pool, seed.Options{Users: 3000, Seed: 9, AsOf: faultAsOf}); err != nil {
		t.Fatal(err)
	}
	if _, err := scheduler.RunDaily(ctx, pool, scheduler.Config{AsOf: faultAsOf, Logger: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	return pool, url
}

type weekSummary struct {
	ISOWeek                                                   string `json:"iso_week"`
	Processed, Succeeded, Failed, Skipped, Queued, Duplicates int
}

func reviews(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return fixture.CountMessages(t, pool, fixture.Messages{Type: "weekly_review"})
}

// TestWeeklyKilledOrCutOffMidRunEndsAsOneCleanRun stops the weekly job
// half-way through its batches, each time on its own identically seeded
// database: killed with SIGKILL (the statement in flight then commits, or
// rolls back), or with every connection ended by pg_terminate_backend (the
// batch is retried on a new connection). Every user is then untouched or
// exactly as one clean run leaves them, the invariants hold, and after a
// re-run the database holds exactly what one clean run wrote.
func TestWeeklyKilledOrCutOffMidRunEndsAsOneCleanRun(t *testing.T) {
	t.Parallel()
	bin := cmdtest.Build(t, "./cmd/engagement-weekly")
	args := []string{"--as-of", faultAsOf.Format(time.RFC3339), "--batch-size", "10", "--concurrency", "1", "--output", "json"}

	cleanPool, cleanURL := mondayMorning(t)
	res := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, cmdtest.Env("DATABASE_URL="+cleanURL), args...)
	if res.Code != 0 {
		t.Fatalf("clean run: exit %d: %s", res.Code, res.Stderr)
	}
	var cleanSum weekSummary
	if err := json.Unmarshal([]byte(res.Stdout), &cleanSum); err != nil {
		t.Fatal(err)
	}
	want, wantUsers, total := fixture.Outcome(t, cleanPool), fixture.UserOutcomes(t, cleanPool), reviews(t, cleanPool)
	if total < 200 {
		t.Fatalf("the clean run queued %d reviews; the test needs dozens of batches", total)
	}

	for _, c := range []struct {
		name      string
		terminate bool // end the connections instead of killing the process
		commits   bool // after the kill, the statement in flight commits
	}{
		{"killed, the batch in flight commits", false, true},
		{"killed, the batch in flight rolls back", false, false},
		{"connections terminated, the batch is retried", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool, url := mondayMorning(t)
			before := fixture.UserOutcomes(t, pool)
			gate := fixture.Pause(t, pool, "engagement_message_queue", "message_type = 'weekly_review'", total/2)
			if c.terminate {
				// Connections end, the process lives on: run in process.
				run := cmdtest.Start(jobcmd.NewWeeklyCommand, cmdtest.Env("DATABASE_URL="+url), args...)
				pid := gate.WaitClosedOn(app, 30*time.Second)
				if n := fixture.TerminateBackends(t, pool, app); n < 1 {
					t.Fatalf("terminated %d connections of the job, want the batch's at least (the job's lease lives in a table, not on a connection)", n)
				}
				gate.WaitClosedOn(app, 30*time.Second, pid) // the retry, on a new connection
				gate.Open()
				res := run.Wait()
				if res.Code != 0 {
					t.Fatalf("the job did not finish after its connections were terminated (exit %d): %s", res.Code, res.Stderr)
				}
				var sum weekSummary
				if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
					t.Fatalf("summary: %v: %s", err, res.Stdout)
				}
				if sum != cleanSum {
					t.Errorf("summary %+v, want the clean run's %+v", sum, cleanSum)
				}
				fixture.SameOutcome(t, "the run whose connections were terminated", want, fixture.Outcome(t, pool))
				checkInvariants(t, pool, "after the run")
				return
			}

			cmd, _, _ := cmdtest.Command(bin, cmdtest.Env("DATABASE_URL="+url), args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			gate.WaitClosedOn(app, 30*time.Second)
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if c.commits {
				gate.Open()
			} else {
				fixture.TerminateBackends(t, pool, app)
			}
			fixture.WaitNoBackends(t, pool, app, 30*time.Second)
			gate.Open()
			gate.Remove()

			if n := reviews(t, pool); n == 0 || n >= total {
				t.Fatalf("%d of %d reviews queued when killed; the test needs a run killed half-way", n, total)
			}
			untouched, finished := fixture.EveryUserWhole(t, before, wantUsers, fixture.UserOutcomes(t, pool))
			if untouched == 0 || finished == 0 {
				t.Errorf("after the kill %d users untouched and %d finished; the test needs a run killed part-way", untouched, finished)
			}
			checkInvariants(t, pool, "after the kill")

			res := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, cmdtest.Env("DATABASE_URL="+url), args...)
			if res.Code != 0 {
				t.Fatalf("re-run: exit %d: %s", res.Code, res.Stderr)
			}
			fixture.SameOutcome(t, "the killed run and its re-run", want, fixture.Outcome(t, pool))
			checkInvariants(t, pool, "after the re-run")
		})
	}
}

// verify requires every invariant engagementctl verify checks to hold.
func checkInvariants(t *testing.T, pool *pgxpool.Pool, when string) {
	t.Helper()
	rep, err := verify.Run(context.Background(), pool, verify.Config{AsOf: faultAsOf})
	if err != nil {
		t.Fatalf("verify %s: %v", when, err)
	}
	for _, c := range rep.Checks {
		if !c.OK {
			t.Errorf("verify %s: %s broken %d times, e.g. %v", when, c.Name, c.Violations, c.Examples)
		}
	}
}
