package migrations_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
)

// Migration 44 lets queue-process's runs be in progress side by side as
// 'delivering', and leaves the jobs' unique index on 'running' runs as it
// was (the previous release's job binaries name it). Its down marks the
// runs still delivering abandoned and takes the status back; the jobs'
// running runs and their index are untouched both ways.
func TestMigration44KeepsTheJobsLeaseAndDownEndsDeliveringRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	conn := connect(t, url)

	const index = "engagement_job_runs_running_idx"
	var before string
	m, err := migrations.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.UpTo(43); err != nil {
		t.Fatal(err)
	}
	before = fixture.IndexDef(t, conn, index)
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	if after := fixture.IndexDef(t, conn, index); after != before {
		t.Errorf("the unique index on running runs at the latest version: %q, want as at 43: %q", after, before)
	}

	fixture.RunningRun(t, conn, "engagement-daily", "")
	if err := fixture.MigrationsDeliveringRuns(ctx, conn, 2); err != nil {
		t.Fatalf("two queue-process runs delivering at once: %v", err)
	}

	if err := m.UpTo(43); err != nil {
		t.Fatalf("down to 43 with runs delivering: %v", err)
	}
	runs := fixture.JobRuns(t, conn)
	for _, run := range runs {
		job, status, finished, reason := run.Job, run.Status, run.Finished, run.Reason
		switch job {
		case "engagement-daily":
			if status != "running" || finished {
				t.Errorf("the daily job's run after down: %s (finished %v), want still running", status, finished)
			}
		case "queue-process":
			if status != "abandoned" || !finished || reason == "" {
				t.Errorf("a queue-process run delivering at down: %s (finished %v, %q), want abandoned, finished, why", status, finished, reason)
			}
		}
	}
	if n := len(runs); n != 3 {
		t.Fatalf("%d runs after down, want 3", n)
	}
	var pgErr *pgconn.PgError
	if err := fixture.MigrationsDeliveringRuns(ctx, conn, 1); !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Errorf("a delivering run at 43: %v, want the status check's refusal (23514)", err)
	}
	if after := fixture.IndexDef(t, conn, index); after != before {
		t.Errorf("the unique index on running runs after down: %q, want %q", after, before)
	}
	if err := m.Up(); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
