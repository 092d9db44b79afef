package migrations_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

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

	const index = `SELECT pg_get_indexdef('engagement_job_runs_running_idx'::regclass)`
	var before string
	m, err := migrations.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.UpTo(43); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, index).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	var after string
	if err := conn.QueryRow(ctx, index).Scan(&after); err != nil || after != before {
		t.Errorf("the unique index on running runs at the latest version: %q (%v), want as at 43: %q", after, err, before)
	}

	var daily int64
	if err := conn.QueryRow(ctx, `INSERT INTO engagement_job_runs (job, as_of) VALUES ('engagement-daily', now()) RETURNING id`).Scan(&daily); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO engagement_job_runs (job, as_of, status) VALUES
		('queue-process', now(), 'delivering'), ('queue-process', now(), 'delivering')`); err != nil {
		t.Fatalf("two queue-process runs delivering at once: %v", err)
	}

	if err := m.UpTo(43); err != nil {
		t.Fatalf("down to 43 with runs delivering: %v", err)
	}
	rows, err := conn.Query(ctx, `SELECT job, status, finished_at IS NOT NULL, coalesce(error, '') FROM engagement_job_runs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var job, status, reason string
		var finished bool
		if err := rows.Scan(&job, &status, &finished, &reason); err != nil {
			t.Fatal(err)
		}
		n++
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
	if err := rows.Err(); err != nil || n != 3 {
		t.Fatalf("%d runs after down (%v), want 3", n, err)
	}
	var pgErr *pgconn.PgError
	if _, err := conn.Exec(ctx, `INSERT INTO engagement_job_runs (job, as_of, status) VALUES ('queue-process', now(), 'delivering')`); !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Errorf("a delivering run at 43: %v, want the status check's refusal (23514)", err)
	}
	if err := conn.QueryRow(ctx, index).Scan(&after); err != nil || after != before {
		t.Errorf("the unique index on running runs after down: %q (%v), want %q", after, err, before)
	}
	if err := m.Up(); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
