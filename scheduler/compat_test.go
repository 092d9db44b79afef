package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// previousRunStart is the statement the previous release's job binaries
// (engagement-daily, engagement-weekly) take a run's lease with, verbatim
// from scheduler/queries/run_start.sql at commit 7559505. Those binaries
// run on a newer schema (migrations.Check accepts one), so the latest
// schema must keep the unique index this statement names.
const previousRunStart = `-- Takes the lease of a job and shard by recording a 'running' run, unless
-- another run holds it (the unique index on running runs): then no row.
INSERT INTO engagement_job_runs (job, as_of, hostname, pid, shard, holder, heartbeat_at)
VALUES (@job, @as_of, @hostname, @pid, @shard::text, @holder, clock_timestamp())
ON CONFLICT (job, (coalesce(shard, ''))) WHERE status = 'running' DO NOTHING
RETURNING id
`

// previousStart runs previousRunStart for job and shard (nil: unsharded)
// as that release's binary does; ok is false when another run holds the
// lease.
func previousStart(t *testing.T, pool *pgxpool.Pool, job string, shard *string) (id int64, ok bool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), previousRunStart, pgx.StrictNamedArgs{
		"job": job, "as_of": asOf, "hostname": "old-release", "pid": 4242, "shard": shard, "holder": "",
	})
	if err == nil {
		id, err = pgx.CollectOneRow(rows, pgx.RowTo[int64])
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false
	case err != nil:
		t.Fatalf("the previous release's run_start for %s on the latest schema: %v", job, err)
	}
	return id, true
}

// The previous release's daily and weekly binaries on a schema at the
// latest version: their statement still takes a job's lease once and
// refuses a second running run of the same job and shard, also while
// queue-process runs (which hold no lease) are in progress side by side.
// Before, migration 44 had narrowed the unique index to leave queue-process
// out, and PostgreSQL could not infer it from the old statement's
// predicate: every old job binary failed to record its run (exit 1).
func TestThePreviousReleasesJobsStillTakeTheLease(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()

	// Two queue-process runs in progress at once.
	var recs []*scheduler.RunRecord
	for range 2 {
		rec, err := scheduler.RecordRun(ctx, pool, "queue-process", nil, time.Minute, zerolog.Nop())
		if err != nil {
			t.Fatalf("record a queue-process run: %v", err)
		}
		t.Cleanup(func() { _ = rec.Finish(context.Background(), map[string]int{}, false, nil) })
		recs = append(recs, rec)
	}

	first, ok := previousStart(t, pool, scheduler.DailyJob, nil)
	if !ok {
		t.Fatal("the previous release's engagement-daily found its lease held, with no run of it in progress")
	}
	if _, ok := previousStart(t, pool, scheduler.DailyJob, nil); ok {
		t.Error("a second run of engagement-daily took the lease while the first holds it")
	}
	shard := "1/2"
	if _, ok := previousStart(t, pool, scheduler.DailyJob, &shard); !ok {
		t.Error("shard 1/2 of engagement-daily found its lease held by the unsharded run")
	}
	if _, ok := previousStart(t, pool, scheduler.DailyJob, &shard); ok {
		t.Error("a second run of engagement-daily's shard 1/2 took the lease")
	}
	if _, ok := previousStart(t, pool, scheduler.WeeklyJob, nil); !ok {
		t.Error("engagement-weekly found its lease held by engagement-daily's run")
	}

	// A third queue-process run is recorded beside the others and the old
	// jobs' runs; the two before it are still in progress.
	third, err := scheduler.RecordRun(ctx, pool, "queue-process", nil, time.Minute, zerolog.Nop())
	if err != nil {
		t.Fatalf("record a third queue-process run: %v", err)
	}
	t.Cleanup(func() { _ = third.Finish(context.Background(), map[string]int{}, false, nil) })
	if inProgress := fixture.CountRuns(t, pool, fixture.Runs{Job: "queue-process", Status: scheduler.RunDelivering}); inProgress != 3 {
		t.Errorf("%d queue-process runs in progress, want 3", inProgress)
	}

	// The old release's run ends as it did (run_finish.sql by id), and
	// the next takes the lease.
	fixture.FinishRun(t, pool, first)
	if _, ok := previousStart(t, pool, scheduler.DailyJob, nil); !ok {
		t.Error("the next run of engagement-daily found the lease held after the first ended")
	}
	for _, rec := range recs {
		if status := fixture.RunStatus(t, pool, rec.ID()); status != scheduler.RunDelivering {
			t.Errorf("queue-process run %d: %q, want still %s", rec.ID(), status, scheduler.RunDelivering)
		}
	}
}
