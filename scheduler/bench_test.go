package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
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

// referenceWeekly is the weekly job's work as one statement.
const referenceWeekly = `
	WITH window_transactions AS (
	    SELECT user_id, count(*) AS n FROM transactions
	     WHERE created_at > @as_of::timestamptz - interval '7 days' AND created_at <= @as_of
	     GROUP BY user_id
	)
	INSERT INTO engagement_message_queue
	       (user_id, message_type, message_key, message_params, destination, destination_jid, scheduled_for, idempotency_key)
	SELECT s.user_id, 'weekly_review', 'engagement.weekly_review.celebration',
	       jsonb_build_object('count', coalesce(w.n, 0)::text),
	       CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
	            THEN 'group' ELSE 'individual' END,
	       btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
	            THEN p.group_jid ELSE p.whatsapp_jid END),
	       least(@as_of::timestamptz, now()), s.user_id::text || ':weekly_review:' || @week::text
	  FROM user_engagement_states s
	  JOIN user_profiles p ON p.user_id = s.user_id
	  LEFT JOIN window_transactions w ON w.user_id = s.user_id
	 WHERE s.state IN ('active', 'help_flow') AND NOT p.reengagement_opt_out
	   AND ((p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> '')
	        OR coalesce(btrim(p.whatsapp_jid), '') <> '')
	   AND (w.user_id IS NOT NULL
	        OR (s.last_activity_at > @as_of::timestamptz - interval '7 days' AND s.last_activity_at <= @as_of))
	ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`

// bench holds what every benchmark of a process shares: one seeded source
// database per size, copied for each contender.
var bench struct {
	sync.Mutex
	sources map[int]string
}

// TestMain drops the benchmarks' source databases when the run ends.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, src := range bench.sources {
		_ = pgtest.DropDatabase(context.Background(), src)
	}
	os.Exit(code)
}

func benchUsers(b *testing.B) int {
	users := 200_000
	if v := os.Getenv("BENCH_USERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_USERS=%q is not a positive number", v)
		}
		users = n
	}
	return users
}

func benchBatchSize() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_BATCH_SIZE")); err == nil && n > 0 {
		return n
	}
	return scheduler.DefaultBatchSize
}

// benchSource seeds (once per process) a database of users and returns its
// name.
func benchSource(b *testing.B, users int) string {
	bench.Lock()
	defer bench.Unlock()
	if src, ok := bench.sources[users]; ok {
		return src
	}
	ctx := context.Background()
	src := fmt.Sprintf("engagement_bench_%d", users)
	url, err := pgtest.CreateDatabase(ctx, src)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	start := time.Now()
	if _, err := seed.Generate(ctx, pool, seed.Options{Users: users, Seed: 1, AsOf: benchAsOf}); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d users in %s", users, time.Since(start).Round(time.Millisecond))
	if bench.sources == nil {
		bench.sources = map[int]string{}
	}
	bench.sources[users] = src
	return src
}

// benchCopy makes database name a fresh copy of src, checkpointed so that
// no contender pays for another's dirty buffers, and connects to it.
func benchCopy(b *testing.B, src, name string) *pgxpool.Pool {
	ctx := context.Background()
	url, err := pgtest.CloneDatabase(ctx, src, name)
	if err != nil {
		b.Fatal(err)
	}
	p, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.Exec(ctx, `CHECKPOINT`); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pgtest.DropDatabase(ctx, name) })
	return p
}

// timed runs fn and adds its duration to total.
func timed(b *testing.B, total *time.Duration, fn func() error) {
	t0 := time.Now()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	*total += time.Since(t0)
}

// BenchmarkDaily compares the daily job with referenceDaily on identical
// copies of one seeded database, alternating the two each iteration. Users:
// BENCH_USERS (default 200,000). Run it with `make bench`. The figures are
// the custom metrics (job-s/op, reference-s/op, job/reference); ns/op also
// counts copying the database.
func BenchmarkDaily(b *testing.B) {
	ctx := context.Background()
	src := benchSource(b, benchUsers(b))
	var refTotal, jobTotal time.Duration
	var refMoved, jobMoved, rounds int
	for b.Loop() {
		rounds++
		ref := benchCopy(b, src, src+"_ref")
		refMoved = 0
		timed(b, &refTotal, func() error {
			for _, sql := range referenceDaily {
				var n int
				if err := ref.QueryRow(ctx, sql, pgx.NamedArgs{"as_of": benchAsOf, "day": benchAsOf.Format(time.DateOnly)}).Scan(&n); err != nil {
					return err
				}
				refMoved += n
			}
			return nil
		})
		ref.Close()

		job := benchCopy(b, src, src+"_job")
		timed(b, &jobTotal, func() error {
			sum, err := scheduler.RunDaily(ctx, job, scheduler.Config{AsOf: benchAsOf, BatchSize: benchBatchSize(), Logger: zerolog.Nop()})
			if err == nil {
				jobMoved = sum.Succeeded
			}
			return err
		})
		job.Close()
	}
	if refMoved != jobMoved {
		b.Fatalf("the reference moved %d users, the job %d: they did not do the same work", refMoved, jobMoved)
	}
	n := float64(rounds)
	b.ReportMetric(refTotal.Seconds()/n, "reference-s/op")
	b.ReportMetric(jobTotal.Seconds()/n, "job-s/op")
	b.ReportMetric(jobTotal.Seconds()/refTotal.Seconds(), "job/reference")
	b.ReportMetric(float64(jobMoved), "users-moved")
}

// BenchmarkWeekly compares the weekly job with referenceWeekly, first run
// and all-duplicates re-run, on identical copies of one seeded database.
func BenchmarkWeekly(b *testing.B) {
	ctx := context.Background()
	src := benchSource(b, benchUsers(b))
	args := pgx.NamedArgs{"as_of": benchAsOf, "week": "2026-W48"}
	var refFirst, refRerun, jobFirst, jobRerun time.Duration
	var refQueued, jobQueued int64
	rounds := 0
	for b.Loop() {
		rounds++
		ref := benchCopy(b, src, src+"_ref")
		timed(b, &refFirst, func() error {
			tag, err := ref.Exec(ctx, referenceWeekly, args)
			refQueued = tag.RowsAffected()
			return err
		})
		timed(b, &refRerun, func() error {
			_, err := ref.Exec(ctx, referenceWeekly, args)
			return err
		})
		ref.Close()

		job := benchCopy(b, src, src+"_job")
		cfg := scheduler.Config{AsOf: benchAsOf, BatchSize: benchBatchSize(), Logger: zerolog.Nop()}
		timed(b, &jobFirst, func() error {
			sum, err := scheduler.RunWeekly(ctx, job, cfg)
			if err == nil {
				jobQueued = int64(sum.Queued)
			}
			return err
		})
		timed(b, &jobRerun, func() error {
			sum, err := scheduler.RunWeekly(ctx, job, cfg)
			if err == nil && (sum.Queued != 0 || int64(sum.Duplicates) != jobQueued) {
				return fmt.Errorf("re-run queued %d with %d duplicates, want 0 and %d", sum.Queued, sum.Duplicates, jobQueued)
			}
			return err
		})
		job.Close()
	}
	if refQueued != jobQueued {
		b.Fatalf("the reference queued %d reviews, the job %d: they did not do the same work", refQueued, jobQueued)
	}
	n := float64(rounds)
	b.ReportMetric(refFirst.Seconds()/n, "reference-s/op")
	b.ReportMetric(jobFirst.Seconds()/n, "job-s/op")
	b.ReportMetric(jobFirst.Seconds()/refFirst.Seconds(), "job/reference")
	b.ReportMetric(refRerun.Seconds()/n, "reference-rerun-s/op")
	b.ReportMetric(jobRerun.Seconds()/n, "job-rerun-s/op")
	b.ReportMetric(jobRerun.Seconds()/refRerun.Seconds(), "rerun-job/reference")
	b.ReportMetric(float64(jobQueued), "reviews")
}
