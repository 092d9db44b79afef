package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/migrations"
)

// TestUpNeverKeepsTheBotWaitingForLong: issue 30 asks that adopting the
// bot's tables never holds a lock the bot would wait on for long. Here the
// bot holds a row of user_engagement_states in an open transaction (a
// message it is handling) while migrate up needs that table for its ALTER
// TABLE. A waiting ALTER queues every later writer of the table behind it,
// so before, with one lock wait of --lock-timeout (30 s here), the bot's
// next write to another user waited for all of it (its own 3 s lock
// timeout fired). Now each attempt waits at most a second and gives way,
// so the bot's write goes through, and up completes once the bot's
// transaction ends.
func TestUpNeverKeepsTheBotWaitingForLong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := botdb.NewDatabaseWithRows(t, time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))

	handling := connect(t, url) // the bot, handling a message
	tx, err := handling.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := fixture.MigrationsTouchState(ctx, tx, botdb.ActiveRecent); err != nil {
		t.Fatal(err)
	}

	m, err := migrations.OpenConfig(ctx, url, migrations.Config{LockTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	done := make(chan error, 1)
	go func() { done <- m.Up() }()

	// Wait until the migrator queues for the table (its ALTER TABLE).
	watch := connect(t, url)
	for waiting := false; !waiting; {
		select {
		case err := <-done:
			t.Fatalf("Up ended (%v) while the bot held a row it needs", err)
		case <-time.After(20 * time.Millisecond):
		}
		waiting = fixture.WaitingLocks(t, watch, "user_engagement_states") > 0
	}

	// The bot's next message, for another user.
	next := connect(t, url)
	fixture.MigrationsSetSession(t, next, "lock_timeout", "3s")
	if err := fixture.MigrationsTouchState(ctx, next, botdb.Silent20Days); err != nil {
		t.Errorf("the bot's write to another user while migrate up waited for the table: %v; want it through within its 3 s", err)
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Up after the bot's transaction ended: %v", err)
	}
	if version, _ := fixture.SchemaVersion(t, watch); uint(version) != migrations.Latest {
		t.Errorf("version %d, want %d", version, migrations.Latest)
	}
}
