package activity_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// userIn makes a user in state from with the timestamps that state needs.
func userIn(t *testing.T, db fixture.DB, from sm.State, lastActivity time.Time) string {
	t.Helper()
	o := fixture.UserOptions{State: string(from), LastActivity: lastActivity}
	switch from {
	case sm.GoodbyeSent:
		o.GoodbyeSentAt = fixture.Ptr(lastActivity.Add(15 * 24 * time.Hour))
		o.GoodbyeExpiresAt = fixture.Ptr(lastActivity.Add(17 * 24 * time.Hour))
	case sm.RemindLater:
		o.RemindAt = fixture.Ptr(lastActivity.Add(30 * 24 * time.Hour))
	}
	return fixture.User(t, db, o)
}

// fireIn is activity.Fire in a savepoint of tx, as a call on its own
// commits or rolls back alone: a refused move leaves tx usable.
func fireIn(ctx context.Context, tx pgx.Tx, user string, trig sm.Trigger, o activity.FireOptions) (st sm.State, err error) {
	err = pgx.BeginFunc(ctx, tx, func(tx pgx.Tx) error {
		st, err = activity.Fire(ctx, tx, user, trig, o)
		return err
	})
	return st, err
}

// TestFireAgreesWithTheTable: every state × trigger pair, fired through
// engagement_fire, does what the Go table (statemachine.Next) says: a bot
// move goes where the table says and is logged once (user_message from
// active, which changes no state, logs nothing); a pair the table lacks,
// a job's trigger, is refused with nothing changed. A bot trigger added to
// the table without the SQL side fails here.
func TestFireAgreesWithTheTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	bot := map[sm.Trigger]bool{sm.UserMessage: true, sm.GoodbyeAnswerHelp: true,
		sm.GoodbyeAnswerRemindLater: true, sm.GoodbyeAnswerDormant: true}
	for _, from := range sm.States() {
		for _, trig := range sm.Triggers() {
			t.Run(fmt.Sprintf("%s/%s", from, trig), func(t *testing.T) {
				tx := pgtest.NewTx(t)
				user := userIn(t, tx, from, at.Add(-20*24*time.Hour))
				before := fixture.StateOf(t, tx, user)
				got, err := fireIn(ctx, tx, user, trig, activity.FireOptions{At: at})
				tr, nextErr := sm.Next(from, trig)
				after := fixture.StateOf(t, tx, user)
				logged := fixture.TransitionsOf(t, tx, user)
				switch {
				case !bot[trig]:
					if !errors.Is(err, activity.ErrNotABotTrigger) {
						t.Errorf("Fire(%s) = %q, %v; want ErrNotABotTrigger", trig, got, err)
					}
				case nextErr != nil:
					var te *sm.TransitionError
					if !errors.As(err, &te) || te.From != from || te.Trigger != trig {
						t.Errorf("Fire = %q, %v; want the table's refusal %v", got, err, nextErr)
					}
				default:
					if err != nil || got != tr.To || sm.State(after.State) != tr.To {
						t.Fatalf("Fire = %q, %v, state now %s; want %s", got, err, after.State, tr.To)
					}
					wantLogs := 1
					if tr.To == from {
						wantLogs = 0
					}
					if len(logged) != wantLogs || wantLogs == 1 && (logged[0].From != string(from) || logged[0].To != string(tr.To) || logged[0].Trigger != string(trig)) {
						t.Errorf("logged %+v, want %d transition %s -%s-> %s", logged, wantLogs, from, trig, tr.To)
					}
					if !after.LastActivityAt.Equal(at) { // every bot move is the user writing
						t.Errorf("%s: last_activity_at %s, want %s", trig, after.LastActivityAt, at)
					}
					if trig == sm.GoodbyeAnswerRemindLater && (after.RemindAt == nil || !after.RemindAt.Equal(at.Add(sm.RemindLaterPeriod))) {
						t.Errorf("remind later: remind_at %v, want %s", after.RemindAt, at.Add(sm.RemindLaterPeriod))
					}
					return
				}
				if after.State != before.State || len(logged) != 0 || !after.LastActivityAt.Equal(before.LastActivityAt) {
					t.Errorf("a refused move changed the user: %+v -> %+v, logged %+v", before, after, logged)
				}
			})
		}
	}
}

// TestAnAnswerToTheGoodbyeIsActivity: issue 32's race test found that a
// user who answered "1 I need help" got a second goodbye the next UTC day
// (the answer left last_activity_at 20 days old). The answer is the user
// writing: the next day's run leaves them in help_flow, and queues
// nothing.
func TestAnAnswerToTheGoodbyeIsActivity(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	day := time.Date(2026, 11, 19, 10, 0, 0, 0, time.UTC)
	user := userIn(t, pool, sm.Active, day.Add(-20*24*time.Hour))
	if _, err := scheduler.RunDaily(ctx, pool, scheduler.Config{AsOf: day}); err != nil {
		t.Fatal(err)
	}
	if st, err := activity.Fire(ctx, pool, user, sm.GoodbyeAnswerHelp, activity.FireOptions{At: day.Add(2 * time.Hour)}); err != nil || st != sm.HelpFlow {
		t.Fatalf("the answer: %q, %v", st, err)
	}
	if _, err := scheduler.RunDaily(ctx, pool, scheduler.Config{AsOf: day.Add(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if st := fixture.StateOf(t, pool, user).State; st != string(sm.HelpFlow) {
		t.Errorf("the day after answering help the user is %s, want help_flow", st)
	}
	if n := len(fixture.MessagesOf(t, pool, user)); n != 1 {
		t.Errorf("%d goodbyes queued, want the one", n)
	}
}

// TestFireRefusesWhatIsNotAMove: an unknown trigger and an unknown user
// are refused with their errors, and change nothing.
func TestFireRefusesWhatIsNotAMove(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	user := userIn(t, tx, sm.Active, time.Now())
	if _, err := fireIn(ctx, tx, user, "wave", activity.FireOptions{}); !errors.Is(err, sm.ErrUnknownTrigger) {
		t.Errorf("Fire(wave) = %v, want ErrUnknownTrigger", err)
	}
	if _, err := fireIn(ctx, tx, fixture.NewID(), sm.UserMessage, activity.FireOptions{}); !errors.Is(err, activity.ErrUnknownUser) {
		t.Errorf("Fire for an unknown user = %v, want ErrUnknownUser", err)
	}
	if n := fixture.CountTransitions(t, tx, fixture.Moves{}); n != 0 {
		t.Errorf("%d transitions logged by refused calls, want 0", n)
	}
}

// TestFireRequestKeyIsANoOpTheSecondTime: a retried webhook (the same
// request key) changes nothing more and returns the state the first call
// left, even when the user has moved on since, and even when the two calls
// race.
func TestFireRequestKeyIsANoOpTheSecondTime(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Second)
	user := userIn(t, pool, sm.GoodbyeSent, at.Add(-20*24*time.Hour))
	first, err := activity.Fire(ctx, pool, user, sm.GoodbyeAnswerRemindLater, activity.FireOptions{At: at, RequestKey: "wamid.1"})
	if err != nil || first != sm.RemindLater {
		t.Fatalf("first call: %q, %v", first, err)
	}
	if _, err := activity.Fire(ctx, pool, user, sm.UserMessage, activity.FireOptions{RequestKey: "wamid.2"}); err != nil {
		t.Fatal(err)
	}
	again, err := activity.Fire(ctx, pool, user, sm.GoodbyeAnswerRemindLater, activity.FireOptions{At: at, RequestKey: "wamid.1"})
	if err != nil || again != sm.RemindLater {
		t.Errorf("the repeated key: %q, %v; want the first call's state, remind_later, and no error", again, err)
	}
	if st := fixture.StateOf(t, pool, user).State; st != string(sm.Active) {
		t.Errorf("after the repeat the user is %s, want active (the repeat changed it)", st)
	}
	if n := len(fixture.TransitionsOf(t, pool, user)); n != 2 {
		t.Errorf("%d transitions logged, want 2", n)
	}

	// Racing twins: both return the same state, one move is logged.
	racer := userIn(t, pool, sm.Dormant, at.Add(-40*24*time.Hour))
	hold, err := pool.Begin(ctx) // holds the key's first call open
	if err != nil {
		t.Fatal(err)
	}
	if st, err := activity.Fire(ctx, hold, racer, sm.UserMessage, activity.FireOptions{RequestKey: "wamid.3"}); err != nil || st != sm.Active {
		t.Fatalf("held call: %q, %v", st, err)
	}
	done := make(chan error, 1)
	var twin sm.State
	go func() {
		var err error
		twin, err = activity.Fire(ctx, pool, racer, sm.UserMessage, activity.FireOptions{RequestKey: "wamid.3"})
		done <- err
	}()
	waitForLockWait(t, pool)
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || twin != sm.Active {
		t.Errorf("the twin call: %q, %v; want active", twin, err)
	}
	if n := len(fixture.TransitionsOf(t, pool, racer)); n != 1 {
		t.Errorf("racing twins logged %d transitions, want 1", n)
	}
}

// waitForLockWait waits until a session of the pool's database waits for
// a lock (the twin call, on the request key).
func waitForLockWait(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, ok := fixture.PollFor(time.Minute, func() (bool, bool) {
		n := fixture.LockWaiters(t, pool, "")
		return n > 0, n > 0
	}); !ok {
		t.Fatal("the twin call never waited for the first")
	}
}

// TestFireNeedsOnlyExecute: a role with EXECUTE on engagement_fire and no
// privilege on any table can fire moves, directly and through PgBouncer in
// transaction mode (a bouncer that logs in to the server as that role);
// it still cannot read the tables; a role without EXECUTE cannot fire.
func TestFireNeedsOnlyExecute(t *testing.T) {
	t.Parallel()
	direct := pgtest.NewDatabase(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	user := userIn(t, admin, sm.GoodbyeSent, time.Now().Add(-20*24*time.Hour))
	role := fmt.Sprintf("engagement_fire_only_%d", time.Now().UnixNano())
	for _, stmt := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT EXECUTE ON FUNCTION engagement_fire(uuid, text, timestamptz, text) TO ` + role,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		admin, err := pgx.Connect(context.Background(), direct)
		if err != nil {
			return
		}
		defer admin.Close(context.Background())
		admin.Exec(context.Background(), `DROP OWNED BY `+role)
		admin.Exec(context.Background(), `DROP ROLE `+role)
	})
	asRole := func(u string) string {
		cfg, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		cfg.User = url.User(role)
		return cfg.String()
	}
	srv, err := pgtest.ServerURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bouncer := pgtest.NewBouncerFor(t, asRole(srv), pgtest.TransactionMode)
	for i, dbURL := range []string{asRole(direct), bouncer.URL(t, asRole(direct))} {
		cfg, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec // as the binaries talk to a pooler
		pool, err := pgxpool.NewWithConfig(ctx, cfg)                // not the binaries' pool: the bot's, as its own driver would open it
		if err != nil {
			t.Fatal(err)
		}
		via := []string{"directly", "through PgBouncer"}[i]
		trig := []sm.Trigger{sm.GoodbyeAnswerHelp, sm.UserMessage}[i]
		want := []sm.State{sm.HelpFlow, sm.Active}[i]
		for range 2 { // the second time a no-op: the same request key
			got, err := activity.Fire(ctx, pool, user, trig, activity.FireOptions{RequestKey: fmt.Sprint("only-execute-", i)})
			if err != nil || got != want {
				t.Errorf("Fire(%s) as a role with only EXECUTE, %s: %q, %v; want %s", trig, via, got, err, want)
			}
		}
		if err := fixture.ActivityCountStates(ctx, pool); err == nil {
			t.Errorf("the EXECUTE-only role could read user_engagement_states %s", via)
		}
		pool.Close()
	}
	if n := len(fixture.TransitionsOf(t, admin, user)); n != 2 {
		t.Errorf("%d transitions logged, want 2 (one per move, none for the repeats)", n)
	}
	if _, err := admin.Exec(ctx, `REVOKE EXECUTE ON FUNCTION engagement_fire(uuid, text, timestamptz, text) FROM `+role); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, asRole(direct))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := activity.Fire(ctx, conn, user, sm.UserMessage, activity.FireOptions{}); err == nil {
		t.Error("a role without EXECUTE fired a move")
	}
}
