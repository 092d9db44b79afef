package scheduler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
)

func TestParseShard(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in      string
		want    scheduler.Shard
		wantErr string
	}{
		{"0/3", scheduler.Shard{Index: 0, Count: 3}, ""},
		{" 2/3 ", scheduler.Shard{Index: 2, Count: 3}, ""},
		{"0/1", scheduler.Shard{Index: 0, Count: 1}, ""},
		{"3/3", scheduler.Shard{}, "from 0 to 2"},
		{"-1/3", scheduler.Shard{}, "from 0 to 2"},
		{"1/0", scheduler.Shard{}, "from 1 to 1024"},
		{"0/1025", scheduler.Shard{}, "from 1 to 1024"},
		{"1", scheduler.Shard{}, "not i/N"},
		{"a/b", scheduler.Shard{}, "not i/N"},
		{"", scheduler.Shard{}, "not i/N"},
	} {
		got, err := scheduler.ParseShard(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseShard(%q) = %v, %v; want an error mentioning %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if s := (scheduler.Shard{Index: 1, Count: 3}).String(); s != "1/3" {
		t.Errorf("String() = %q, want 1/3", s)
	}
	if s := (scheduler.Shard{Index: 0, Count: 1}); s.Sharded() || s.String() != "" {
		t.Errorf("0/1 is every user: Sharded() = %v, String() = %q; want false, empty", s.Sharded(), s.String())
	}
}

// TestThreeShardsDoWhatOneRunDoes runs the daily and the weekly job once
// unsharded and once as three concurrent shards, on identical seeded
// databases, and compares everything they wrote.
func TestThreeShardsDoWhatOneRunDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	asOf := time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)
	seeded := func() *pgxpool.Pool {
		pool, _ := pgtest.NewPool(t)
		if _, err := seed.Generate(ctx, pool, seed.Options{Users: 3000, Seed: 7, AsOf: asOf}); err != nil {
			t.Fatal(err)
		}
		return pool
	}
	whole, sharded := seeded(), seeded()
	jobs := []struct {
		name string
		run  func(context.Context, *pgxpool.Pool, scheduler.Config) (*scheduler.Summary, error)
	}{
		{"daily", scheduler.RunDaily},
		{"weekly", scheduler.RunWeekly},
	}

	for _, job := range jobs {
		one, err := job.run(ctx, whole, scheduler.Config{AsOf: asOf, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatalf("%s unsharded: %v", job.name, err)
		}

		// The three shards run at once: each waits only for its own shard.
		sums := make([]*scheduler.Summary, 3)
		var wg sync.WaitGroup
		for i := range sums {
			wg.Go(func() {
				sum, err := job.run(ctx, sharded, scheduler.Config{AsOf: asOf, Shard: scheduler.Shard{Index: i, Count: 3}, Logger: zerolog.Nop()})
				if err != nil {
					t.Errorf("%s shard %d/3: %v", job.name, i, err)
					return
				}
				sums[i] = sum
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}

		var total scheduler.Counts
		for i, sum := range sums {
			if want := []string{"0/3", "1/3", "2/3"}[i]; sum.Shard != want {
				t.Errorf("%s shard %d summary says shard %q, want %q", job.name, i, sum.Shard, want)
			}
			if sum.Processed == 0 || sum.Processed == one.Processed {
				t.Errorf("%s shard %d processed %d of the unsharded run's %d: want a real part of them", job.name, i, sum.Processed, one.Processed)
			}
			total.Processed += sum.Processed
			total.Succeeded += sum.Succeeded
			total.Skipped += sum.Skipped
			total.Queued += sum.Queued
			total.Duplicates += sum.Duplicates
		}
		if total.Processed != one.Processed || total.Succeeded != one.Succeeded || total.Skipped != one.Skipped ||
			total.Queued != one.Queued || total.Duplicates != one.Duplicates {
			t.Errorf("%s: the shards' counters add up to %+v, the unsharded run's are %+v", job.name, total, one.Counts)
		}
		if one.Queued == 0 {
			t.Fatalf("%s queued nothing: the comparison would prove nothing", job.name)
		}
	}

	want, got := fixture.Outcome(t, whole), fixture.Outcome(t, sharded)
	for name := range want {
		if got[name] != want[name] {
			t.Errorf("three shards wrote different %s than one run (%d vs %d bytes)", name, len(got[name]), len(want[name]))
		}
	}

	runs := fixture.SucceededShards(t, sharded)
	if runs != 3 {
		t.Errorf("job runs record %d distinct shards, want 3 (0/3, 1/3, 2/3)", runs)
	}
}

func TestShardedRunMarksOnlyItsOwnShardAbandoned(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	mine := fixture.RunningRun(t, pool, scheduler.DailyJob, "1/3")
	other := fixture.RunningRun(t, pool, scheduler.DailyJob, "2/3")
	runDaily(t, pool, scheduler.Config{Shard: scheduler.Shard{Index: 1, Count: 3}, Logger: zerolog.Nop()})
	if s := fixture.RunStatus(t, pool, mine); s != "abandoned" {
		t.Errorf("a dead run of the same shard is %q, want abandoned", s)
	}
	if s := fixture.RunStatus(t, pool, other); s != "running" {
		t.Errorf("a run of another shard is %q, want still running: it may be alive", s)
	}
}
