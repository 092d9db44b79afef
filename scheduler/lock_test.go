package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// botLock is a transaction of "the bot" on a connection of its own,
// holding row locks until the test releases it.
type botLock struct {
	conn *pgx.Conn
	tx   pgx.Tx
}

// holdLocks opens a second, real connection to the test database and runs
// each statement (a SELECT … FOR UPDATE, say) in one open transaction, as
// the bot does while it handles a user's message.
func holdLocks(t *testing.T, url string, statements ...string) *botLock {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range statements {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatalf("the bot's %q: %v", sql, err)
		}
	}
	return &botLock{conn: conn, tx: tx}
}

func (b *botLock) release(t *testing.T) {
	t.Helper()
	if err := b.tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// shortTimeoutPool is a pool on url whose statements time out after 1 s and
// whose lock waits give up after 200 ms, the setting of issue 15's report
// (13.7 s with a 1 s timeout): a job that waits for a row lock fails users
// instead of moving on.
func shortTimeoutPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := postgres.PoolConfig(context.Background(), url, "engagement-daily")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "1000"
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "200"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // not the binaries' pool: PoolConfig's, with server-side timeouts
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Issue 15: the bot holds one user's row locked (SELECT … FOR UPDATE on
// another connection) while the daily job runs. Every step skips that user
// with reason "locked" instead of waiting, moves everyone else, and the
// next run, once the lock is gone, moves the user.
func TestDailySkipsUsersTheBotHoldsLocked(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	day := 24 * time.Hour
	fixture.InactiveUsers(t, pool, 30, asOf.Add(-20*day))
	inactive := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * day)})
	sent := asOf.Add(-50 * time.Hour)
	goodbye := func() string {
		return fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: asOf.Add(-30 * day),
			GoodbyeSentAt: &sent, GoodbyeExpiresAt: fixture.Ptr(sent.Add(48 * time.Hour))})
	}
	reminder := func() string {
		return fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: asOf.Add(-20 * day), RemindAt: fixture.Ptr(asOf.Add(-time.Hour))})
	}
	for range 10 {
		goodbye()
		reminder()
	}
	expired, due := goodbye(), reminder()
	// A profile the bot holds locked does not stop the job: the batch
	// statements lock only user_engagement_states rows.
	profileHeld := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * day)})

	bot := holdLocks(t, url,
		`SELECT 1 FROM user_engagement_states WHERE user_id IN ('`+inactive+`', '`+expired+`', '`+due+`') FOR UPDATE`,
		`SELECT 1 FROM user_profiles WHERE user_id = '`+profileHeld+`' FOR UPDATE`)

	jobPool := shortTimeoutPool(t, url)
	// Small batches: the held users share statements with others.
	sum := runDaily(t, jobPool, scheduler.Config{Logger: zerolog.Nop(), BatchSize: 4})

	for _, step := range []struct {
		name  string
		moved int
	}{{"inactivity_14d", 31}, {"goodbye_timeout", 10}, {"reminder_due", 10}} {
		c := stepOf(t, sum, step.name)
		if c.SkipReasons[sm.SkipLocked] != 1 || c.Failed != 0 || c.Succeeded != step.moved {
			t.Errorf("step %s: %+v, want %d moved, the held user skipped as locked, none failed", step.name, c, step.moved)
		}
	}
	if sum.SkipReasons[sm.SkipLocked] != 3 || sum.Skipped != 3 || sum.Failed != 0 {
		t.Errorf("summary %+v, want 3 skipped as locked and none failed", sum.Counts)
	}
	for user, want := range map[string]string{inactive: "active", expired: "goodbye_sent", due: "remind_later", profileHeld: "goodbye_sent"} {
		if got := fixture.StateOf(t, pool, user).State; got != want {
			t.Errorf("user %s: state %q while the bot held its row, want %q", user, got, want)
		}
	}
	if msgs := fixture.MessagesOf(t, pool, inactive); len(msgs) != 0 {
		t.Errorf("the held user got %d messages, want none yet", len(msgs))
	}

	bot.release(t)
	next := runDaily(t, jobPool, scheduler.Config{Logger: zerolog.Nop(), BatchSize: 4})
	if next.Processed != 3 || next.Succeeded != 3 || next.Skipped != 0 || next.Queued != 1 {
		t.Errorf("the run after the lock is gone: %+v, want the 3 held users moved and 1 goodbye queued", next.Counts)
	}
	for user, want := range map[string]string{inactive: "goodbye_sent", expired: "dormant", due: "dormant"} {
		if got := fixture.StateOf(t, pool, user).State; got != want {
			t.Errorf("user %s: state %q after the next run, want %q", user, got, want)
		}
	}
	if v := fixture.DailyInvariantViolations(t, pool); v != 0 {
		t.Errorf("%d users violate the daily invariants", v)
	}
}

// The weekly review locks no row the bot holds: it reads states and
// profiles without locking them, and its queue insert's ON CONFLICT DO
// NOTHING does not lock the review already queued. So a user whose state,
// profile or queued review the bot holds is reviewed (or counted a
// duplicate) as usual, without waiting.
func TestWeeklyDoesNotWaitForTheBotsRowLocks(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	ctx := context.Background()
	weekAsOf := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	recent := weekAsOf.Add(-24 * time.Hour)
	var users []string
	for range 12 {
		users = append(users, fixture.User(t, pool, fixture.UserOptions{LastActivity: recent}))
	}
	stateHeld, profileHeld, reviewHeld := users[0], users[1], users[2]

	cfg := scheduler.Config{AsOf: weekAsOf, Logger: zerolog.Nop(), BatchSize: 4}
	jobPool := shortTimeoutPool(t, url)
	// The held review is queued by an earlier run of the week; drop the
	// other two users' reviews so that this run queues them again.
	if _, err := scheduler.RunWeekly(ctx, jobPool, cfg); err != nil {
		t.Fatal(err)
	}
	fixture.DeleteMessages(t, pool, "", []string{stateHeld, profileHeld}, "")

	bot := holdLocks(t, url,
		`SELECT 1 FROM user_engagement_states WHERE user_id = '`+stateHeld+`' FOR UPDATE`,
		`SELECT 1 FROM user_profiles WHERE user_id = '`+profileHeld+`' FOR UPDATE`,
		`SELECT 1 FROM engagement_message_queue WHERE user_id = '`+reviewHeld+`' FOR UPDATE`)
	defer bot.release(t)

	sum, err := scheduler.RunWeekly(ctx, jobPool, cfg)
	if err != nil {
		t.Fatalf("RunWeekly while the bot holds rows: %v", err)
	}
	if sum.Failed != 0 || sum.Skipped != 0 || sum.Queued != 2 || sum.Duplicates != 10 || sum.Succeeded != 12 {
		t.Errorf("summary %+v, want the two held users' reviews queued, 10 duplicates (the held review among them), nothing failed or skipped", sum.Counts)
	}
	for _, u := range []string{stateHeld, profileHeld, reviewHeld} {
		if msgs := fixture.MessagesOf(t, pool, u); len(msgs) != 1 {
			t.Errorf("user %s has %d reviews, want 1", u, len(msgs))
		}
	}
}
