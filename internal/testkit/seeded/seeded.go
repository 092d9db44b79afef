// Package seeded gives tests a database holding a realistic mix of users on
// which the daily and the weekly job have run: what status, verify and the
// queue's checks are tested against.
package seeded

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// AsOf is a Monday morning: the daily and weekly jobs of seeded
// databases run as of it (ISO week 2026-W10).
var AsOf = time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)

// Pool is a database holding a realistic mix of users on which the
// daily and the weekly job ran as of AsOf: real queued goodbyes and
// reviews, transition log rows and run records.
func Pool(t *testing.T) (*pgxpool.Pool, *scheduler.Summary, *scheduler.Summary) {
	t.Helper()
	ctx := context.Background()
	pool, _ := pgtest.NewPool(t)
	if _, err := seed.Generate(ctx, pool, seed.Options{Users: 2000, Seed: 6, AsOf: AsOf}); err != nil {
		t.Fatal(err)
	}
	daily, err := scheduler.RunDaily(ctx, pool, scheduler.Config{AsOf: AsOf})
	if err != nil {
		t.Fatalf("RunDaily: %v", err)
	}
	weekly, err := scheduler.RunWeekly(ctx, pool, scheduler.Config{AsOf: AsOf})
	if err != nil {
		t.Fatalf("RunWeekly: %v", err)
	}
	if daily.Queued == 0 || weekly.Queued == 0 || StepCounts(daily, "goodbye_timeout").Succeeded == 0 {
		t.Fatalf("the seeded database should hold goodbyes, reviews and timeouts: daily %+v, weekly %+v", daily.Counts, weekly.Counts)
	}
	return pool, daily, weekly
}

func StepCounts(sum *scheduler.Summary, name string) scheduler.Counts {
	for _, s := range sum.Steps {
		if s.Name == name {
			return s.Counts
		}
	}
	return scheduler.Counts{}
}
