package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// point is one size of the scaling suite: each job, and each job's
// single-statement reference, on its own fresh copy of the same seeded
// database.
type point struct {
	Users int  `json:"users"`
	Seed  proc `json:"seed"` // engagementctl seed into an empty migrated database
	// SeedReused: the seeded database came from -template-db (Seed is
	// empty: the seed ran before, outside this run).
	SeedReused   bool  `json:"seed_reused,omitempty"`
	Daily        proc  `json:"daily"`
	Moved        int   `json:"daily_moved"`
	Weekly       proc  `json:"weekly"`
	Reviews      int   `json:"weekly_queued"`
	WeeklyRerun  proc  `json:"weekly_rerun"`
	RerunDupes   int   `json:"weekly_rerun_duplicates"`
	DatabaseSize int64 `json:"database_bytes"`
	// The references (scheduler/testdata/reference_*.sql) on identical
	// copies: wall time of their statements, run by this tool.
	DailyReference  float64 `json:"daily_reference_seconds,omitempty"`
	WeeklyReference float64 `json:"weekly_reference_seconds,omitempty"`
	// QueueProcess is queue-process delivering the weekly reviews (webhook
	// transport, unpaced) for at most queueSeconds: its peak RSS with a
	// queue as long as the user base makes it.
	QueueProcess proc `json:"queue_process,omitempty"`
	QueueSent    int  `json:"queue_process_sent,omitempty"`
	// LoadAvg is the machine's load average when the size was done.
	LoadAvg string `json:"load_avg,omitempty"`
}

// queueSeconds bounds the scaling suite's queue-process run (--max-duration).
const queueSeconds = 20

type scalingResult struct {
	Machine machine `json:"machine"`
	AsOf    string  `json:"as_of"`
	Points  []point `json:"points"`
}

// jobSummary is the part of the jobs' --output json summary read here.
type jobSummary struct {
	Succeeded  int `json:"succeeded"`
	Queued     int `json:"queued"`
	Duplicates int `json:"duplicates"`
	Failed     int `json:"failed"`
}

// scalingJobs says which jobs the scaling suite runs at each size (-jobs):
// both by default; one alone when only its figures are wanted (at 10M users
// the daily job and its reference take a quarter of an hour).
type scalingJobs struct{ daily, weekly bool }

func parseJobs(list string) (scalingJobs, error) {
	var j scalingJobs
	for _, f := range strings.Split(list, ",") {
		switch strings.TrimSpace(f) {
		case "daily":
			j.daily = true
		case "weekly":
			j.weekly = true
		default:
			return j, fmt.Errorf("unknown job %q (daily, weekly)", f)
		}
	}
	return j, nil
}

func runScaling(ctx context.Context, bin string, sizes []int, jobs scalingJobs, seeded *templates) (scalingResult, error) {
	res := scalingResult{AsOf: asOf.Format(time.RFC3339)}
	at := "--as-of=" + asOf.Format(time.RFC3339)
	for _, n := range sizes {
		p := point{Users: n}
		src, srcURL, seedRun, err := seeded.source(ctx, bin, n)
		if err != nil {
			return res, err
		}
		defer seeded.done(ctx, src)
		p.Seed, p.SeedReused = seedRun, seedRun == (proc{})
		if p.DatabaseSize, err = checkpoint(ctx, srcURL); err != nil {
			return res, err
		}

		// The copies are named after the size, whatever the source.
		base := fmt.Sprintf("engagement_benchtool_%d", n)
		copyOf := func(suffix string) (string, error) {
			u, err := pgtest.CloneDatabase(ctx, src, base+suffix)
			if err == nil {
				_, err = checkpoint(ctx, u)
			}
			return u, err
		}
		if jobs.daily {
			if err := scaleDaily(ctx, bin, at, &p, copyOf, base); err != nil {
				return res, err
			}
		}
		if jobs.weekly {
			if err := scaleWeekly(ctx, bin, at, &p, copyOf, base); err != nil {
				return res, err
			}
		}
		seeded.done(ctx, src)
		p.LoadAvg = loadAvg()
		res.Points = append(res.Points, p)
		fmt.Printf("scaling: %d users done (seed %.1f s, daily %.1f s (reference %.1f s), weekly %.1f s (reference %.1f s) / re-run %.1f s, queue-process %d sent; load %s)\n",
			n, p.Seed.Seconds, p.Daily.Seconds, p.DailyReference, p.Weekly.Seconds, p.WeeklyReference, p.WeeklyRerun.Seconds, p.QueueSent, p.LoadAvg)
	}
	return res, nil
}

// scaleDaily runs the daily reference and the daily job, each on its own
// fresh copy of src, and checks they moved the same users.
func scaleDaily(ctx context.Context, bin, at string, p *point, copyOf func(string) (string, error), base string) error {
	n := p.Users
	refURL, err := copyOf("_ref")
	if err != nil {
		return err
	}
	var refMoved int
	if p.DailyReference, refMoved, err = runReference(ctx, refURL, referenceDaily); err != nil {
		return err
	}
	_ = pgtest.DropDatabase(ctx, base+"_ref")

	dailyURL, err := copyOf("_daily")
	if err != nil {
		return err
	}
	var daily jobSummary
	if p.Daily, err = runBinary(ctx, bin, "engagement-daily", dailyURL, &daily, at, "--output=json"); err != nil {
		return err
	}
	p.Moved = daily.Succeeded
	_ = pgtest.DropDatabase(ctx, base+"_daily")
	if refMoved != p.Moved {
		return fmt.Errorf("%d users: the daily reference moved %d users, the job %d", n, refMoved, p.Moved)
	}
	return nil
}

// scaleWeekly runs the weekly reference, then the weekly job twice (first
// run and same-week re-run) and queue-process on its reviews, each side on
// its own fresh copy of src, and checks job and reference queued the same
// reviews.
func scaleWeekly(ctx context.Context, bin, at string, p *point, copyOf func(string) (string, error), base string) error {
	n := p.Users
	refURL, err := copyOf("_ref")
	if err != nil {
		return err
	}
	var refQueued int
	if p.WeeklyReference, refQueued, err = runReference(ctx, refURL, referenceWeekly); err != nil {
		return err
	}
	_ = pgtest.DropDatabase(ctx, base+"_ref")

	weeklyURL, err := copyOf("_weekly")
	if err != nil {
		return err
	}
	defer pgtest.DropDatabase(context.WithoutCancel(ctx), base+"_weekly") //nolint:errcheck
	var weekly, rerun jobSummary
	if p.Weekly, err = runBinary(ctx, bin, "engagement-weekly", weeklyURL, &weekly, at, "--output=json"); err != nil {
		return err
	}
	if p.WeeklyRerun, err = runBinary(ctx, bin, "engagement-weekly", weeklyURL, &rerun, at, "--output=json"); err != nil {
		return err
	}
	p.Reviews, p.RerunDupes = weekly.Queued, rerun.Duplicates
	if rerun.Queued != 0 || rerun.Duplicates != weekly.Queued {
		return fmt.Errorf("%d users: the weekly re-run queued %d with %d duplicates, want 0 and %d", n, rerun.Queued, rerun.Duplicates, weekly.Queued)
	}
	if refQueued != p.Reviews {
		return fmt.Errorf("%d users: the weekly reference queued %d reviews, the job %d", n, refQueued, p.Reviews)
	}
	p.QueueProcess, p.QueueSent, err = runQueueBacklog(ctx, bin, weeklyURL)
	return err
}

// checkpoint flushes the database's dirty buffers, so that no run pays for
// another's writes, and returns its size.
func checkpoint(ctx context.Context, dbURL string) (int64, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
		return 0, err
	}
	var size int64
	err = conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&size)
	return size, err
}

// walLSN is the database cluster's current WAL insert position.
func walLSN(ctx context.Context, dbURL string) (string, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var lsn string
	err = conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn)
	return lsn, err
}

// walSince is how many bytes of WAL the cluster wrote since lsn (walLSN).
func walSince(ctx context.Context, dbURL, lsn string) (float64, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var bytes float64
	err = conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::float8`, lsn).Scan(&bytes)
	return bytes, err
}

// withOptions appends URL query options ("statement_timeout=0") to dbURL.
// BENCH_SEED_URL_OPTIONS passes them to the seed, should it need its
// statement timeout lifted at 10M users.
func withOptions(dbURL, options string) string {
	if options == "" {
		return dbURL
	}
	if strings.Contains(dbURL, "?") {
		return dbURL + "&" + options
	}
	return dbURL + "?" + options
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

func (r scalingResult) markdown() string {
	var b strings.Builder
	b.WriteString("\n## Scaling: the binaries as processes (wall time, peak RSS)\n\n")
	b.WriteString("| users | DB size | `engagementctl seed` | daily: moved | `engagement-daily` | daily reference | weekly: queued | `engagement-weekly` | weekly reference | re-run | `queue-process` (sent in " + fmt.Sprint(queueSeconds) + " s) |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Points {
		seedCell := fmt.Sprintf("%.2f s, %.0f MiB", p.Seed.Seconds, mib(p.Seed.MaxRSS))
		if p.SeedReused {
			seedCell = "(-template-db)"
		}
		daily, weekly := "| — | — | —", "| — | — | — | — | —"
		if p.Daily.Seconds > 0 {
			daily = fmt.Sprintf("| %d | %.2f s, %.0f MiB | %.2f s (job %.2f×)", p.Moved, p.Daily.Seconds, mib(p.Daily.MaxRSS),
				p.DailyReference, ratio(p.Daily.Seconds, p.DailyReference))
		}
		if p.Weekly.Seconds > 0 {
			weekly = fmt.Sprintf("| %d | %.2f s, %.0f MiB | %.2f s (job %.2f×) | %.2f s, %.0f MiB | %d, %.0f MiB",
				p.Reviews, p.Weekly.Seconds, mib(p.Weekly.MaxRSS), p.WeeklyReference, ratio(p.Weekly.Seconds, p.WeeklyReference),
				p.WeeklyRerun.Seconds, mib(p.WeeklyRerun.MaxRSS), p.QueueSent, mib(p.QueueProcess.MaxRSS))
		}
		fmt.Fprintf(&b, "| %d | %.0f MiB | %s %s %s |\n", p.Users, float64(p.DatabaseSize)/(1<<20), seedCell, daily, weekly)
	}
	if len(r.Points) > 1 {
		first, last := r.Points[0], r.Points[0] // the smallest and the largest size
		for _, p := range r.Points {
			if p.Users < first.Users {
				first = p
			}
			if p.Users > last.Users {
				last = p
			}
		}
		x := float64(last.Users) / float64(first.Users)
		// (0× where a job did not run, or the seed was a -template-db's.)
		fmt.Fprintf(&b, "\n%.0f× the users: seed %.1f×, daily %.1f×, weekly %.1f×, re-run %.1f× the time; daily RSS %.2f×, weekly RSS %.2f×\n",
			x, ratio(last.Seed.Seconds, first.Seed.Seconds), ratio(last.Daily.Seconds, first.Daily.Seconds), ratio(last.Weekly.Seconds, first.Weekly.Seconds),
			ratio(last.WeeklyRerun.Seconds, first.WeeklyRerun.Seconds), ratio(float64(last.Daily.MaxRSS), float64(first.Daily.MaxRSS)),
			ratio(float64(last.Weekly.MaxRSS), float64(first.Weekly.MaxRSS)))
	}
	return b.String()
}

func ratio(job, reference float64) float64 {
	if reference == 0 {
		return 0
	}
	return job / reference
}
