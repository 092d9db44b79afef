package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/pgtest"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// benchAsOf is the instant the benchmark data and runs are relative to.
var benchAsOf = time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)

// referenceDaily is the daily job's work done the fastest way PostgreSQL
// can: one statement per step over every qualifying user, no batches, no
// bookkeeping. It is the yardstick the job is measured against.
var referenceDaily = []string{
	`WITH moved AS (
	    UPDATE user_engagement_states s
	       SET state = 'goodbye_sent', goodbye_sent_at = @as_of,
	           goodbye_expires_at = @as_of::timestamptz + interval '48 hours', updated_at = now()
	      FROM user_profiles p
	     WHERE p.user_id = s.user_id
	       AND s.state = 'active' AND s.last_activity_at < @as_of::timestamptz - interval '14 days'
	       AND NOT p.reengagement_opt_out
	       AND ((p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> '')
	            OR coalesce(btrim(p.whatsapp_jid), '') <> '')
	 RETURNING s.user_id,
	           CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
	                THEN 'group' ELSE 'individual' END AS destination,
	           btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
	                THEN p.group_jid ELSE p.whatsapp_jid END) AS destination_jid
	), queued AS (
	    INSERT INTO engagement_message_queue
	           (user_id, message_type, message_key, destination, destination_jid, scheduled_for, idempotency_key)
	    SELECT user_id, 'goodbye', 'engagement.goodbye.self_select', destination, destination_jid,
	           least(@as_of::timestamptz, now()), user_id::text || ':goodbye_sent:' || @day::text
	      FROM moved
	    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	), logged AS (
	    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger)
	    SELECT user_id, 'active', 'goodbye_sent', 'inactivity_14d' FROM moved
	)
	SELECT count(*) FROM moved`,
	`WITH moved AS (
	    UPDATE user_engagement_states s SET state = 'dormant', updated_at = now()
	      FROM user_profiles p
	     WHERE p.user_id = s.user_id AND s.state = 'goodbye_sent' AND NOT p.reengagement_opt_out
	       AND (s.goodbye_expires_at <= @as_of
	            OR (s.goodbye_expires_at IS NULL AND s.goodbye_sent_at <= @as_of::timestamptz - interval '48 hours'))
	 RETURNING s.user_id
	), logged AS (
	    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger)
	    SELECT user_id, 'goodbye_sent', 'dormant', 'goodbye_timeout' FROM moved
	)
	SELECT count(*) FROM moved`,
	`WITH moved AS (
	    UPDATE user_engagement_states s SET state = 'dormant', updated_at = now()
	      FROM user_profiles p
	     WHERE p.user_id = s.user_id AND s.state = 'remind_later' AND NOT p.reengagement_opt_out
	       AND s.remind_at <= @as_of
	 RETURNING s.user_id
	), logged AS (
	    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger)
	    SELECT user_id, 'remind_later', 'dormant', 'reminder_due' FROM moved
	)
	SELECT count(*) FROM moved`,
}

// BenchmarkDaily compares the daily job with referenceDaily on identical
// copies of one seeded database, alternating the two each iteration. Users:
// BENCH_USERS (default 200,000). Run it with `make bench`. The figures are
// the custom metrics (job-s/op, reference-s/op, job/reference); ns/op also
// counts copying the database.
func BenchmarkDaily(b *testing.B) {
	users := 200_000
	if v := os.Getenv("BENCH_USERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_USERS=%q is not a positive number", v)
		}
		users = n
	}
	batchSize := scheduler.DefaultBatchSize
	if v := os.Getenv("BENCH_BATCH_SIZE"); v != "" {
		batchSize, _ = strconv.Atoi(v)
	}
	ctx := context.Background()
	src := fmt.Sprintf("engagement_bench_%d", users)
	srcURL, err := pgtest.CreateDatabase(ctx, src)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, srcURL)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := seed.Generate(ctx, pool, seed.Options{Users: users, Seed: 1, AsOf: benchAsOf}); err != nil {
		b.Fatal(err)
	}
	pool.Close()
	b.Logf("seeded %d users in %s", users, time.Since(start).Round(time.Millisecond))
	b.Cleanup(func() { _ = pgtest.DropDatabase(ctx, src) })

	copyOf := func(name string) *pgxpool.Pool {
		b.Helper()
		url, err := pgtest.CloneDatabase(ctx, src, name)
		if err != nil {
			b.Fatal(err)
		}
		p, err := pgxpool.New(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		// Start both contenders from the same place: a checkpoint, so
		// neither pays for the other's dirty buffers.
		if _, err := p.Exec(ctx, `CHECKPOINT`); err != nil {
			b.Fatal(err)
		}
		return p
	}

	var refTotal, jobTotal time.Duration
	var refMoved, jobMoved int
	rounds := 0
	for b.Loop() {
		rounds++
		ref := copyOf(src + "_ref")
		t0 := time.Now()
		refMoved = 0
		for _, sql := range referenceDaily {
			var n int
			if err := ref.QueryRow(ctx, sql, pgx.NamedArgs{"as_of": benchAsOf, "day": benchAsOf.Format(time.DateOnly)}).Scan(&n); err != nil {
				b.Fatal(err)
			}
			refMoved += n
		}
		refTotal += time.Since(t0)
		ref.Close()

		job := copyOf(src + "_job")
		t0 = time.Now()
		sum, err := scheduler.RunDaily(ctx, job, scheduler.Config{AsOf: benchAsOf, BatchSize: batchSize, Logger: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		jobTotal += time.Since(t0)
		jobMoved = sum.Succeeded
		job.Close()
	}
	if refMoved != jobMoved {
		b.Fatalf("the reference moved %d users, the job %d: they did not do the same work", refMoved, jobMoved)
	}
	_ = pgtest.DropDatabase(ctx, src+"_ref")
	_ = pgtest.DropDatabase(ctx, src+"_job")
	n := float64(rounds)
	b.ReportMetric(refTotal.Seconds()/n, "reference-s/op")
	b.ReportMetric(jobTotal.Seconds()/n, "job-s/op")
	b.ReportMetric(jobTotal.Seconds()/refTotal.Seconds(), "job/reference")
	b.ReportMetric(float64(jobMoved), "users-moved")
	b.ReportMetric(float64(jobMoved)/(jobTotal.Seconds()/n), "users/s")
}
