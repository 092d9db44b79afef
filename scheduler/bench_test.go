package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// benchAsOf is the instant the benchmark data and runs are relative to.
var benchAsOf = time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)

// referenceDaily is the daily job's work done the fastest way PostgreSQL
// can: one statement per step over every qualifying user, no batches, no
// bookkeeping beyond what the job's rows carry too (the run's id on each
// message and log row). It is the yardstick the job is measured against.
var referenceDaily = []struct {
	sql  string
	args pgx.StrictNamedArgs
}{
	{readReference("reference_daily_inactivity.sql"), pgx.StrictNamedArgs{"as_of": benchAsOf, "day": benchAsOf.Format(time.DateOnly), "run_id": benchRunID}},
	{readReference("reference_daily_timeout.sql"), pgx.StrictNamedArgs{"as_of": benchAsOf, "run_id": benchRunID}},
	{readReference("reference_daily_reminder.sql"), pgx.StrictNamedArgs{"as_of": benchAsOf, "run_id": benchRunID}},
}

// benchRunID is the job_run_id the references write, as the job writes its
// run's id: the partial indexes on job_run_id (WHERE job_run_id IS NOT
// NULL) then cost both sides the same.
const benchRunID = 1

// referenceWeekly is the weekly job's work as one statement.
var referenceWeekly = readReference("reference_weekly.sql")

// readReference reads a reference statement from testdata/, where the
// scaling benchmark (bench/) reads it too.
func readReference(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

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
// name; with BENCH_TEMPLATE_DB it returns that database instead.
func benchSource(b *testing.B, users int) string {
	bench.Lock()
	defer bench.Unlock()
	if src, ok := bench.sources[users]; ok {
		return src
	}
	ctx := context.Background()
	if tmpl := os.Getenv("BENCH_TEMPLATE_DB"); tmpl != "" {
		// A database seeded before (engagementctl seed --users N --as-of
		// 2026-11-23T06:00:00Z): copied, never changed nor dropped.
		srv, err := pgtest.ServerURL(ctx)
		if err != nil {
			b.Fatal(err)
		}
		url, err := pgtest.WithDatabase(srv, tmpl)
		if err != nil {
			b.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatalf("BENCH_TEMPLATE_DB=%s: %v", tmpl, err)
		}
		n := fixture.CountProfiles(b, conn)
		conn.Close(ctx)
		if n != users {
			b.Fatalf("BENCH_TEMPLATE_DB=%s holds %d users, want BENCH_USERS=%d", tmpl, n, users)
		}
		b.Logf("copying %s (%d users) instead of seeding", tmpl, n)
		return tmpl
	}
	src := fmt.Sprintf("engagement_bench_%d", users)
	url, err := pgtest.CreateDatabase(ctx, src)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url) // not the binaries' pool: the seeder's
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
	p, err := postgres.Open(ctx, url, "engagement-bench")
	if err != nil {
		b.Fatal(err)
	}
	fixture.Checkpoint(b, p)
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
			for _, step := range referenceDaily {
				var n int
				if err := ref.QueryRow(ctx, step.sql, step.args).Scan(&n); err != nil {
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

	// The per-user design, once per benchmark (it is a sample): on a third
	// copy, extrapolated from the sample to every user the job moved.
	if sample := benchNaiveSample(b); sample > 0 {
		naive := benchCopy(b, src, src+"_naive")
		one, two, sampled := naiveDaily(b, naive, sample)
		naive.Close()
		b.ReportMetric(float64(sampled), "naive-sampled-users")
		b.ReportMetric(one.Seconds(), "naive-1conn-s(extrapolated)")
		b.ReportMetric(two.Seconds(), "naive-2conn-s(extrapolated)")
		b.ReportMetric(two.Seconds()/(jobTotal.Seconds()/n), "speedup-vs-naive-2conn")
		b.ReportMetric(one.Seconds()/(jobTotal.Seconds()/n), "speedup-vs-naive-1conn")
	}
}

// benchNaiveSample is how many users BenchmarkDaily moves the per-user way
// (BENCH_NAIVE_SAMPLE, default 5,000; 0 skips it).
func benchNaiveSample(b *testing.B) int {
	v := os.Getenv("BENCH_NAIVE_SAMPLE")
	if v == "" {
		return 5000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("BENCH_NAIVE_SAMPLE=%q is not a number", v)
	}
	return n
}

// naiveStep is one daily step done the per-user way: select the eligible
// ids, then one transaction per user (SELECT … FOR UPDATE, UPDATE, INSERT
// the message when the step sends one, INSERT the log row).
type naiveStep struct {
	eligible          string // SELECT s.user_id … over s and p, $1 = as-of
	lock              string // $1 = user id, $2 = as-of: the row if it still qualifies
	update            string // $1 = user id, $2 = as-of
	message           bool   // the goodbye: route and queue it
	from, to, trigger string
}

var naiveSteps = []naiveStep{
	{
		eligible: `SELECT s.user_id FROM user_engagement_states s JOIN user_profiles p ON p.user_id = s.user_id
		            WHERE s.state = 'active' AND s.last_activity_at < $1::timestamptz - interval '14 days'
		              AND NOT p.reengagement_opt_out
		              AND ((p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> '')
		                   OR coalesce(btrim(p.whatsapp_jid), '') <> '')
		            ORDER BY s.user_id`,
		lock: `SELECT CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
		                   THEN 'group' ELSE 'individual' END,
		              btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
		                   THEN p.group_jid ELSE p.whatsapp_jid END)
		         FROM user_engagement_states s JOIN user_profiles p ON p.user_id = s.user_id
		        WHERE s.user_id = $1 AND s.state = 'active' AND s.last_activity_at < $2::timestamptz - interval '14 days'
		          FOR UPDATE OF s`,
		update: `UPDATE user_engagement_states SET state = 'goodbye_sent', goodbye_sent_at = $2,
		                goodbye_expires_at = $2::timestamptz + interval '48 hours', updated_at = now() WHERE user_id = $1`,
		message: true, from: "active", to: "goodbye_sent", trigger: "inactivity_14d",
	},
	{
		eligible: `SELECT s.user_id FROM user_engagement_states s JOIN user_profiles p ON p.user_id = s.user_id
		            WHERE s.state = 'goodbye_sent' AND NOT p.reengagement_opt_out
		              AND (s.goodbye_expires_at <= $1 OR (s.goodbye_expires_at IS NULL
		                   AND s.goodbye_sent_at <= $1::timestamptz - interval '48 hours'))
		            ORDER BY s.user_id`,
		lock: `SELECT '', '' FROM user_engagement_states s WHERE s.user_id = $1 AND s.state = 'goodbye_sent'
		          AND (s.goodbye_expires_at <= $2 OR (s.goodbye_expires_at IS NULL
		               AND s.goodbye_sent_at <= $2::timestamptz - interval '48 hours')) FOR UPDATE`,
		update: `UPDATE user_engagement_states SET state = 'dormant', updated_at = now() WHERE user_id = $1 AND $2::timestamptz IS NOT NULL`,
		from:   "goodbye_sent", to: "dormant", trigger: "goodbye_timeout",
	},
	{
		eligible: `SELECT s.user_id FROM user_engagement_states s JOIN user_profiles p ON p.user_id = s.user_id
		            WHERE s.state = 'remind_later' AND NOT p.reengagement_opt_out AND s.remind_at <= $1
		            ORDER BY s.user_id`,
		lock: `SELECT '', '' FROM user_engagement_states s WHERE s.user_id = $1 AND s.state = 'remind_later'
		          AND s.remind_at <= $2 FOR UPDATE`,
		update: `UPDATE user_engagement_states SET state = 'dormant', updated_at = now() WHERE user_id = $1 AND $2::timestamptz IS NOT NULL`,
		from:   "remind_later", to: "dormant", trigger: "reminder_due",
	},
}

// naiveDaily moves a sample of about sample users per step the per-user
// way, shared among the steps in proportion to their eligible users, once
// on one connection and once (other users) on two side by side, the job's
// default concurrency. It returns each way's time extrapolated to every
// eligible user (selection included) and how many users it moved.
func naiveDaily(b *testing.B, pool *pgxpool.Pool, sample int) (one, two time.Duration, sampled int) {
	ctx := context.Background()
	ids := make([][]string, len(naiveSteps))
	selectTime := make([]time.Duration, len(naiveSteps))
	total := 0
	for i, st := range naiveSteps {
		t0 := time.Now()
		rows, err := pool.Query(ctx, st.eligible, benchAsOf)
		if err != nil {
			b.Fatal(err)
		}
		uuids, err := pgx.CollectRows(rows, pgx.RowTo[pgtype.UUID])
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = make([]string, len(uuids))
		for k, id := range uuids {
			ids[i][k] = id.String()
		}
		selectTime[i] = time.Since(t0)
		total += len(ids[i])
	}
	day := benchAsOf.Format(time.DateOnly)
	move := func(st naiveStep, id string) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
		var dest, jid string
		if err := tx.QueryRow(ctx, st.lock, id, benchAsOf).Scan(&dest, &jid); err != nil {
			return fmt.Errorf("take the row of %s: %w", id, err)
		}
		if _, err := tx.Exec(ctx, st.update, id, benchAsOf); err != nil {
			return err
		}
		if st.message {
			if err := fixture.SchedNaiveGoodbye(ctx, tx, id, dest, jid, benchAsOf, day); err != nil {
				return err
			}
		}
		if err := fixture.SchedNaiveTransition(ctx, tx, id, st.from, st.to, st.trigger); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	// run moves users on conns connections side by side and returns the
	// wall time.
	run := func(st naiveStep, users []string, conns int) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		t0 := time.Now()
		for range conns {
			wg.Go(func() {
				for k := int(next.Add(1)) - 1; k < len(users); k = int(next.Add(1)) - 1 {
					if err := move(st, users[k]); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for i, st := range naiveSteps {
		n := len(ids[i])
		k := min(n/2, (sample*n+total-1)/max(total, 1))
		if k == 0 {
			continue
		}
		t1 := run(st, ids[i][:k], 1)
		t2 := run(st, ids[i][k:2*k], 2)
		sampled += 2 * k
		perUser1, perUser2 := t1/time.Duration(k), t2/time.Duration(k)
		one += selectTime[i] + perUser1*time.Duration(n)
		two += selectTime[i] + perUser2*time.Duration(n)
		b.Logf("per-user %s: %d of %d users, %s/user on 1 connection, %s/user on 2",
			st.trigger, k, n, perUser1.Round(time.Microsecond), perUser2.Round(time.Microsecond))
	}
	return one, two, sampled
}

// BenchmarkWeekly compares the weekly job with referenceWeekly, first run
// and all-duplicates re-run, on identical copies of one seeded database.
func BenchmarkWeekly(b *testing.B) {
	ctx := context.Background()
	src := benchSource(b, benchUsers(b))
	args := pgx.StrictNamedArgs{"as_of": benchAsOf, "week": "2026-W48", "run_id": benchRunID}
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
