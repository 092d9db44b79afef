package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/pgtest"
)

// point is one size of the scaling suite: each job on its own fresh copy
// of the same seeded database.
type point struct {
	Users        int   `json:"users"`
	Seed         proc  `json:"seed"` // engagementctl seed into an empty migrated database
	Daily        proc  `json:"daily"`
	Moved        int   `json:"daily_moved"`
	Weekly       proc  `json:"weekly"`
	Reviews      int   `json:"weekly_queued"`
	WeeklyRerun  proc  `json:"weekly_rerun"`
	RerunDupes   int   `json:"weekly_rerun_duplicates"`
	DatabaseSize int64 `json:"database_bytes"`
}

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

func runScaling(ctx context.Context, bin string, sizes []int) (scalingResult, error) {
	res := scalingResult{AsOf: asOf.Format(time.RFC3339)}
	at := "--as-of=" + asOf.Format(time.RFC3339)
	for _, n := range sizes {
		p := point{Users: n}
		src := fmt.Sprintf("engagement_benchtool_%d", n)
		srcURL, err := pgtest.CreateDatabase(ctx, src)
		if err != nil {
			return res, err
		}
		defer pgtest.DropDatabase(context.WithoutCancel(ctx), src) //nolint:errcheck
		if p.Seed, err = runBinary(ctx, bin, "engagementctl", srcURL, nil, "seed", fmt.Sprint("--users=", n), "--seed=1", at, "--output=json"); err != nil {
			return res, err
		}
		if p.DatabaseSize, err = checkpoint(ctx, srcURL); err != nil {
			return res, err
		}

		copyOf := func(suffix string) (string, error) {
			u, err := pgtest.CloneDatabase(ctx, src, src+suffix)
			if err == nil {
				_, err = checkpoint(ctx, u)
			}
			return u, err
		}
		dailyURL, err := copyOf("_daily")
		if err != nil {
			return res, err
		}
		var daily jobSummary
		if p.Daily, err = runBinary(ctx, bin, "engagement-daily", dailyURL, &daily, at, "--output=json"); err != nil {
			return res, err
		}
		p.Moved = daily.Succeeded
		_ = pgtest.DropDatabase(ctx, src+"_daily")

		weeklyURL, err := copyOf("_weekly")
		if err != nil {
			return res, err
		}
		var weekly, rerun jobSummary
		if p.Weekly, err = runBinary(ctx, bin, "engagement-weekly", weeklyURL, &weekly, at, "--output=json"); err != nil {
			return res, err
		}
		if p.WeeklyRerun, err = runBinary(ctx, bin, "engagement-weekly", weeklyURL, &rerun, at, "--output=json"); err != nil {
			return res, err
		}
		p.Reviews, p.RerunDupes = weekly.Queued, rerun.Duplicates
		if rerun.Queued != 0 || rerun.Duplicates != weekly.Queued {
			return res, fmt.Errorf("%d users: the weekly re-run queued %d with %d duplicates, want 0 and %d", n, rerun.Queued, rerun.Duplicates, weekly.Queued)
		}
		_ = pgtest.DropDatabase(ctx, src+"_weekly")
		_ = pgtest.DropDatabase(ctx, src)
		res.Points = append(res.Points, p)
		fmt.Printf("scaling: %d users done (seed %.1f s, daily %.1f s, weekly %.1f s / re-run %.1f s)\n",
			n, p.Seed.Seconds, p.Daily.Seconds, p.Weekly.Seconds, p.WeeklyRerun.Seconds)
	}
	return res, nil
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

func mib(kib int64) float64 { return float64(kib) / 1024 }

func (r scalingResult) markdown() string {
	var b strings.Builder
	b.WriteString("\n## Scaling: the binaries as processes (wall time, peak RSS)\n\n")
	b.WriteString("| users | DB size | `engagementctl seed` | daily: moved | `engagement-daily` | weekly: queued | `engagement-weekly` | re-run |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Points {
		fmt.Fprintf(&b, "| %d | %.0f MiB | %.2f s, %.0f MiB | %d | %.2f s, %.0f MiB | %d | %.2f s, %.0f MiB | %.2f s, %.0f MiB |\n",
			p.Users, float64(p.DatabaseSize)/(1<<20), p.Seed.Seconds, mib(p.Seed.MaxRSS), p.Moved, p.Daily.Seconds, mib(p.Daily.MaxRSS),
			p.Reviews, p.Weekly.Seconds, mib(p.Weekly.MaxRSS), p.WeeklyRerun.Seconds, mib(p.WeeklyRerun.MaxRSS))
	}
	if len(r.Points) > 1 {
		first, last := r.Points[0], r.Points[len(r.Points)-1]
		x := float64(last.Users) / float64(first.Users)
		fmt.Fprintf(&b, "\n%.0f× the users: seed %.1f×, daily %.1f×, weekly %.1f×, re-run %.1f× the time; daily RSS %.2f×, weekly RSS %.2f×\n",
			x, last.Seed.Seconds/first.Seed.Seconds, last.Daily.Seconds/first.Daily.Seconds, last.Weekly.Seconds/first.Weekly.Seconds,
			last.WeeklyRerun.Seconds/first.WeeklyRerun.Seconds, float64(last.Daily.MaxRSS)/float64(first.Daily.MaxRSS),
			float64(last.Weekly.MaxRSS)/float64(first.Weekly.MaxRSS))
	}
	return b.String()
}
