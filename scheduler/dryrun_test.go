package scheduler

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// dryRunUsers gives every step of both jobs users to count: goodbyes (one
// of them a duplicate, one opted out, one without a JID), timed-out
// goodbyes, due reminders and weekly reviews. It returns one of the users
// a goodbye is due for.
func dryRunUsers(t *testing.T, db fixture.DB, asOf time.Time) string {
	t.Helper()
	silent := asOf.Add(-20 * 24 * time.Hour)
	fixture.InactiveUsers(t, db, 30, silent) // enough that a 30 % holdout holds some out
	fixture.User(t, db, fixture.UserOptions{LastActivity: silent, OptedOut: true})
	fixture.User(t, db, fixture.UserOptions{LastActivity: silent, WhatsAppJID: fixture.NoJID})
	dup := fixture.User(t, db, fixture.UserOptions{LastActivity: silent})
	fixture.Queue(t, db, fixture.Message{User: dup, Type: "goodbye", Key: dup + goodbye.KeySuffix(asOf)})
	sent := asOf.Add(-50 * time.Hour)
	for range 3 {
		fixture.User(t, db, fixture.UserOptions{State: "goodbye_sent", LastActivity: asOf.Add(-30 * 24 * time.Hour),
			GoodbyeSentAt: &sent, GoodbyeExpiresAt: fixture.Ptr(sent.Add(48 * time.Hour))})
	}
	for range 2 {
		fixture.User(t, db, fixture.UserOptions{State: "remind_later", LastActivity: asOf.Add(-20 * 24 * time.Hour),
			RemindAt: fixture.Ptr(asOf.Add(-time.Hour))})
	}
	for range 4 {
		fixture.User(t, db, fixture.UserOptions{LastActivity: asOf.Add(-24 * time.Hour)})
	}
	return dup
}

// A dry run is the steps' own move statements with their writes switched
// off (@dry_run): it must write no row and lock none. Checked in the dry
// run's own transaction, before it is rolled back: it was never given a
// transaction id (PostgreSQL gives one to the first write or row lock), it
// sees no row it added; and from a second connection, which can lock
// every row at once without waiting. Any of the three fails if a statement
// lost its gate on @dry_run.
func TestADryRunWritesNoRowAndLocksNone(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	asOf := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	dryRunUsers(t, pool, asOf)

	// The queue, the log, the runs, the users moved and the users.
	rows := func(db fixture.DB) [5]int {
		users := fixture.CountStates(t, db, fixture.States{})
		return [5]int{fixture.CountMessages(t, db, fixture.Messages{}), fixture.CountTransitions(t, db, fixture.Moves{}),
			fixture.CountRuns(t, db, fixture.Runs{}), users - fixture.CountStates(t, db, fixture.States{State: "active"}), users}
	}
	before := rows(pool)

	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the dry run's transaction is always rolled back
	pid := *fixture.BackendOf(t, tx).PID

	// Every step of both jobs, the reminder queued on request too.
	steps, err := dailySteps(asOf, Config{SendReminder: true, Holdout: Holdout{Percent: 50}})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range append(steps, weeklyReviewStep(asOf)) {
		c, err := dryRunStep(ctx, tx, st, moveArgs{shardIndex: 0, shardCount: 1})
		if err != nil {
			t.Fatalf("dry run of %s: %v", st.name, err)
		}
		if c.Succeeded == 0 {
			t.Errorf("the dry run of %s counted nobody (%+v): the test's users do not reach it", st.name, c)
		}
	}

	if xid := fixture.BackendOf(t, tx).Xid; xid != nil {
		t.Errorf("the dry run's transaction has id %s: it wrote or locked a row", *xid)
	}
	if after := rows(tx); after != before {
		t.Errorf("inside the dry run's transaction the queue, log, runs, moved users and users are %v, before it %v: it wrote", after, before)
	}

	// A second connection, as the bot would be: every row it may need is
	// free now, while the dry run's transaction is still open.
	bot, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Release()
	btx, err := bot.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer btx.Rollback(ctx) //nolint:errcheck // only locks taken
	if pidBot := *fixture.BackendOf(t, btx).PID; pidBot == pid {
		t.Fatalf("the second connection is backend %d, the dry run's %d: not a second connection", pidBot, pid)
	}
	for _, table := range []string{"user_engagement_states", "user_profiles", "engagement_message_queue"} {
		sp, err := btx.Begin(ctx) // a savepoint: one refusal leaves the next check standing
		if err != nil {
			t.Fatal(err)
		}
		if err := fixture.LockEveryRowNowait(ctx, sp, table); err != nil {
			t.Errorf("a second connection cannot lock every row of %s at once: %v (the dry run holds a row)", table, err)
		}
		if err := sp.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if held := fixture.RowLocks(t, btx, pid); held != 0 {
		t.Errorf("the dry run's backend holds %d transaction or tuple locks, want none", held)
	}
}

// A dry run neither waits for a row the bot holds nor counts it as
// locked: it counts what a run would do once the bot let go, step by step
// and counter by counter, the same as the real run then does.
func TestADryRunCountsWhatTheRunDoesAndWaitsForNoLock(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	asOf := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	held := dryRunUsers(t, pool, asOf)
	// Opted-out reminders are left out: the reminder's dry run counts their
	// message as queued (an upper bound), the run queues none.
	cfg := Config{AsOf: asOf, SendReminder: true, Holdout: Holdout{Percent: 30}, Logger: zerolog.Nop()}

	bot, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Release()
	btx, err := bot.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fixture.LockUser(t, btx, held)

	waitFor, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dry := cfg
	dry.DryRun = true
	dryDaily, err := RunDaily(waitFor, pool, dry)
	if err != nil {
		t.Fatalf("the dry run with a row held: %v", err)
	}
	dryWeekly, err := RunWeekly(waitFor, pool, dry)
	if err != nil {
		t.Fatalf("the weekly dry run with a row held: %v", err)
	}
	if err := btx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	realDaily, err := RunDaily(ctx, pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	realWeekly, err := RunWeekly(ctx, pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		job       string
		dry, real *Summary
	}{{DailyJob, dryDaily, realDaily}, {WeeklyJob, dryWeekly, realWeekly}} {
		if !reflect.DeepEqual(c.dry.Steps, c.real.Steps) || !reflect.DeepEqual(c.dry.Counts, c.real.Counts) ||
			!reflect.DeepEqual(c.dry.Messages, c.real.Messages) {
			t.Errorf("%s: the dry run counted %+v, the run did %+v", c.job, c.dry.Steps, c.real.Steps)
		}
	}
	// Who is held out depends on the random user ids: the duplicate may be.
	if st := stepCounts(realDaily, "inactivity_14d"); st.Succeeded != 31 || st.Skipped != 2 ||
		st.Queued+st.Duplicates+st.HeldOut != st.Succeeded || st.Duplicates > 1 {
		t.Errorf("inactivity_14d %+v: want 31 moved (the held user among them), each queued, held out or the duplicate, 2 skipped", st)
	}
}

func stepCounts(sum *Summary, name string) Counts {
	for _, st := range sum.Steps {
		if st.Name == name {
			return st.Counts
		}
	}
	return Counts{}
}
