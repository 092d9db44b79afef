package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/retention"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/sender"
)

func TestCleanupKeepsWhatAReRunCouldProduceAgain(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	// The jobs ran on Thursday 2026-11-26; cleanup runs 40 days later with a
	// 30-day retention: the cutoff is 2026-12-06.
	runDay := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	cleanupAt := runDay.Add(40 * 24 * time.Hour)
	recent := time.Date(2026, 12, 20, 9, 0, 0, 0, time.UTC) // inside the retention window

	inactive := fixture.User(t, pool, fixture.UserOptions{LastActivity: runDay.Add(-20 * 24 * time.Hour)})
	active := fixture.User(t, pool, fixture.UserOptions{LastActivity: runDay.Add(-24 * time.Hour)})
	lateActive := fixture.User(t, pool, fixture.UserOptions{LastActivity: recent.Add(-24 * time.Hour)})
	if _, err := scheduler.RunDaily(ctx, pool, scheduler.Config{AsOf: runDay, Logger: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{runDay, recent} {
		if _, err := scheduler.RunWeekly(ctx, pool, scheduler.Config{AsOf: at, Logger: zerolog.Nop()}); err != nil {
			t.Fatal(err)
		}
	}
	// Everything was delivered long ago, as far as the rows tell.
	fixture.DeliveredLongAgo(t, pool, runDay)
	pending := fixture.User(t, pool, fixture.UserOptions{LastActivity: runDay})
	if _, err := sender.Enqueue(ctx, pool, sender.Message{UserID: pending, Type: fixture.Reminder.Type(), ScheduledFor: runDay}); err != nil {
		t.Fatal(err)
	}
	fixture.SetMessages(t, pool, fixture.MessageChange{User: pending, CreatedAt: runDay})
	// A goodbye of a day inside the window, queued (as far as created_at
	// tells) long ago: a daily re-run of that day would produce its key.
	lateDay := time.Date(2026, 12, 10, 6, 0, 0, 0, time.UTC)
	lateGoodbye := fixture.Goodbye.Key(pending, lateDay)
	lateStart, lateEnd := fixture.Goodbye.Period.Bounds(lateDay)
	fixture.Queue(t, pool, fixture.Message{User: pending, Type: "goodbye", Status: "sent", Key: lateGoodbye, CreatedAt: runDay,
		PeriodStart: lateStart, ReplayUntil: lateEnd})
	total := fixture.CountMessages(t, pool, fixture.Messages{}) // a review of W48, one of W51, a goodbye, a pending reminder

	cfg := retention.CleanupConfig{OlderThan: 30 * 24 * time.Hour, AsOf: cleanupAt, DryRun: true}
	dry, err := retention.Cleanup(ctx, pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}); n != total {
		t.Fatalf("the dry run deleted %d messages", total-n)
	}
	cfg.DryRun = false
	cfg.BatchSize = 1 // several batches
	sum, err := retention.Cleanup(ctx, pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Deleted: the goodbye of 11-26 and the W48 review (its week ended
	// before the cutoff). Kept: the W51 review (its week is inside the
	// window) and the pending message.
	if sum.Messages != 2 || sum.Ledger != 2 || dry.Messages != sum.Messages || dry.Ledger != sum.Ledger {
		t.Errorf("cleanup %+v, dry run %+v; want 2 messages and 2 ledger rows, counted alike", sum, dry)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Users: []string{inactive, active}}); n != 0 {
		t.Errorf("%d messages of 11-26 left, want the goodbye and the W48 review deleted", n)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Key: lateGoodbye}); n != 1 {
		t.Error("the goodbye of a day inside the retention window was deleted")
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "pending"}); n != 1 {
		t.Errorf("%d pending messages left, want the pending one kept", n)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Key: lateActive + ":weekly_review:2026-W51"}); n != 1 {
		t.Error("the review of a week inside the retention window was deleted")
	}

	// A weekly re-run inside the window still queues no duplicate.
	again, err := scheduler.RunWeekly(ctx, pool, scheduler.Config{AsOf: recent, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if again.Queued != 0 || again.Duplicates != 1 {
		t.Errorf("weekly re-run inside the window: queued %d duplicates %d, want 0 and 1", again.Queued, again.Duplicates)
	}
}
