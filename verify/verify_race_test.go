package verify_test

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/verify"
)

// Issue 16, point 2: verify's log_matches_state cried wolf (exit 4) when
// the bot moved a user in a transaction that began before the job's
// transition and committed after it: the bot stamps updated_at with its
// transaction's now(), which is earlier than the transition's created_at
// although the bot's write came later. Two real connections interleave
// exactly so: the bot begins, the daily job moves the user and commits,
// then the bot moves the user back to active and commits; in the second
// case the bot's UPDATE even waits on the row lock of the job's
// uncommitted transaction (held at a gate) before it goes through.
func TestVerifyNoFalseAlarmWhenTheBotsTransactionSpansTheJobs(t *testing.T) {
	t.Parallel()
	for _, blocked := range []bool{false, true} {
		name := "bot writes after the job committed"
		if blocked {
			name = "bot's write waits on the job's row lock"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dbURL := pgtest.NewDatabase(t)
			jobPool := poolNamed(t, dbURL, "verify-race-job")
			asOf := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
			user := fixture.User(t, jobPool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour)})

			// The bot's transaction begins (its now() is fixed here) and
			// reads the user, before the job starts.
			bot, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer bot.Close(ctx)
			botTx, err := bot.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer botTx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
			fixture.StateRows(t, botTx, user)
			botNow := fixture.Now(t, botTx)
			botMove := `UPDATE user_engagement_states SET state = 'active', last_activity_at = now(), updated_at = now() WHERE user_id = $1`

			var gate *fixture.Gate
			if blocked {
				gate = fixture.Pause(t, jobPool, "engagement_state_transitions", "user_id = '"+user+"'", 1)
			}
			jobDone := make(chan error, 1)
			go func() {
				_, err := scheduler.RunDaily(ctx, jobPool, scheduler.Config{AsOf: asOf, Logger: zerolog.Nop()})
				jobDone <- err
			}()
			if blocked {
				// The job has moved and logged the user, uncommitted; the
				// bot's UPDATE waits for its row lock.
				gate.WaitClosedOn("verify-race-job", time.Minute)
				botDone := make(chan error, 1)
				go func() {
					_, err := botTx.Exec(ctx, botMove, user)
					botDone <- err
				}()
				if _, ok := fixture.PollFor(time.Minute, func() (int, bool) {
					n := fixture.LockWaiters(t, jobPool, botMove)
					return n, n == 1
				}); !ok {
					t.Fatal("the bot's UPDATE never waited on the job's row lock")
				}
				gate.Open()
				if err := <-jobDone; err != nil {
					t.Fatalf("RunDaily: %v", err)
				}
				if err := <-botDone; err != nil {
					t.Fatalf("the bot's UPDATE: %v", err)
				}
			} else {
				if err := <-jobDone; err != nil {
					t.Fatalf("RunDaily: %v", err)
				}
				if _, err := botTx.Exec(ctx, botMove, user); err != nil {
					t.Fatal(err)
				}
			}
			if err := botTx.Commit(ctx); err != nil {
				t.Fatal(err)
			}

			// The interleaving happened as described: the log says the job
			// moved the user at a time after the bot's transaction began,
			// and the bot's later move is the state.
			logs, states := fixture.LogRows(t, jobPool, fixture.Logged{Users: []string{user}}), fixture.StateRows(t, jobPool, user)
			if len(logs) != 1 || len(states) != 1 {
				t.Fatalf("%d log rows and %d state rows of the user, want one of each", len(logs), len(states))
			}
			logged, loggedTo, state, updated := logs[0].CreatedAt, logs[0].ToState, states[0].State, states[0].UpdatedAt
			if loggedTo != "goodbye_sent" || state != "active" || !updated.Equal(botNow) || !botNow.Before(logged) {
				t.Fatalf("log %s at %s, state %s updated %s, bot's now %s: want the job's goodbye_sent logged after the bot's transaction began, then the bot's active",
					loggedTo, logged, state, updated, botNow)
			}

			rep := check(t, jobPool, asOf.Add(time.Hour))
			if c := checkOf(t, rep, verify.CheckLogMatchesState); !c.OK || !rep.OK {
				t.Fatalf("verify after a bot move that overlapped the job's: broken %v, %s: %d violations %q; want no false alarm",
					rep.Broken, c.Name, c.Violations, c.Examples)
			}
		})
	}
}

// Still caught after the fix: a transition logged after the state's last
// change that disagrees with it (the job logged a move it did not make),
// even when the state's updated_at is that of a transaction that began
// before the log row's.
func TestVerifyCatchesALoggedMoveThatWasNotMade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewPool(t)
	asOf := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour)})
	// The bot moves the user (to help_flow, as they write: last_activity_at too) in a transaction that began
	// earlier; afterwards a log row claims a move to goodbye_sent that the
	// state never saw.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fixture.SetState(t, tx, user, fixture.StateChange{State: "help_flow", LastActivity: asOf, UpdatedAt: fixture.Now(t, tx)})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	fixture.LogMove(t, pool, fixture.Move{User: user, From: "active", To: "goodbye_sent", Trigger: "inactivity_14d"})
	rep := check(t, pool, asOf)
	c := checkOf(t, rep, verify.CheckLogMatchesState)
	if c.OK || c.Violations != 1 || !slices.Equal(rep.Broken, []string{verify.CheckLogMatchesState}) {
		t.Fatalf("broken %v, %s: %d violations %q; want exactly log_matches_state with 1 violation", rep.Broken, c.Name, c.Violations, c.Examples)
	}
}

// poolNamed opens a pool on dbURL whose connections carry application_name
// app (so a test can find them in pg_stat_activity), closed in t.Cleanup.
func poolNamed(t *testing.T, dbURL, app string) *pgxpool.Pool {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	pool, err := postgres.Open(context.Background(), u.String(), app)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Issue 24, point 5: verify exited 4 with false log_matches_state
// violations after the bot answered goodbyes in a later transaction that
// changed state without touching updated_at (nothing asks the bot to
// stamp it). The trigger of migration 15 stamps every state change: a
// change written after the log row is the log's news, whatever the bot
// did with updated_at.
func TestVerifyNoFalseAlarmWhenTheBotLeavesUpdatedAtAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewPool(t)
	asOf := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	var users []string
	for range 3 {
		users = append(users, fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour)}))
	}
	if _, err := scheduler.RunDaily(ctx, pool, scheduler.Config{AsOf: asOf, Logger: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	// The users answer the goodbye: the bot moves them on, its own way.
	now := fixture.Now(t, pool)
	fixture.SetState(t, pool, users[0], fixture.StateChange{State: "active", LastActivity: now})
	fixture.SetState(t, pool, users[1], fixture.StateChange{State: "remind_later", RemindAt: now.Add(14 * 24 * time.Hour)})
	fixture.SetState(t, pool, users[2], fixture.StateChange{State: "help_flow", LastActivity: now, UpdatedAt: now})

	rep := check(t, pool, asOf.Add(time.Hour))
	if c := checkOf(t, rep, verify.CheckLogMatchesState); !c.OK {
		t.Errorf("%s: %d violations %q after the bot answered without stamping updated_at; want none", c.Name, c.Violations, c.Examples)
	}
}
