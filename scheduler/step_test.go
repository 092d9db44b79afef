package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// dueUsers makes, for each daily step's trigger, a user the trigger is due
// for at asOf, in the state of the transition's first row. A new daily
// step adds its own here.
var dueUsers = map[sm.Trigger]func(asOf time.Time) fixture.UserOptions{
	sm.Inactivity14d: func(asOf time.Time) fixture.UserOptions {
		return fixture.UserOptions{LastActivity: asOf.Add(-sm.InactivityPeriod - time.Hour)}
	},
	sm.GoodbyeTimeout: func(asOf time.Time) fixture.UserOptions {
		sent := asOf.Add(-3 * sm.GoodbyeWindow)
		return fixture.UserOptions{State: string(sm.GoodbyeSent), LastActivity: sent.Add(-sm.InactivityPeriod),
			GoodbyeSentAt: &sent, GoodbyeExpiresAt: fixture.Ptr(sent.Add(sm.GoodbyeWindow))}
	},
	sm.ReminderDue: func(asOf time.Time) fixture.UserOptions {
		return fixture.UserOptions{State: string(sm.RemindLater), LastActivity: asOf.Add(-30 * 24 * time.Hour),
			RemindAt: fixture.Ptr(asOf.Add(-time.Hour))}
	},
}

// Each daily step does what the state machine's tables say, read from the
// database after a real run: a user due for its trigger moves along the
// table's row, the move is logged as that row, and the kind the trigger
// queues (statemachine.Kinds) is queued under its key, exactly when the
// tables say so (a kind queued on request only when asked).
func TestDailyStepsFollowTheStateMachine(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 11, 18, 12, 0, 0, 0, time.UTC)
	steps, err := dailySteps(asOf, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range steps {
		names = append(names, st.name)
	}
	if want := []string{"inactivity_14d", "goodbye_timeout", "reminder_due"}; !slices.Equal(names, want) {
		t.Errorf("daily steps %q, want %q", names, want)
	}

	for _, onRequest := range []bool{false, true} {
		t.Run(fmt.Sprintf("send_reminder=%v", onRequest), func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			users := map[sm.Trigger]string{}
			for _, st := range steps {
				due, ok := dueUsers[sm.Trigger(st.name)]
				if !ok {
					t.Fatalf("daily step %s has no due user in dueUsers: add one", st.name)
				}
				users[sm.Trigger(st.name)] = fixture.User(t, pool, due(asOf))
			}
			_, err := RunDaily(context.Background(), pool, Config{AsOf: asOf, SendReminder: onRequest, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			for trigger, user := range users {
				i := slices.IndexFunc(sm.Transitions(), func(t sm.Transition) bool { return t.Trigger == trigger })
				row := sm.Transitions()[i]
				if got := fixture.StateOf(t, pool, user).State; got != string(row.To) {
					t.Errorf("%s: user in %s, want the table's %s", trigger, got, row.To)
				}
				want := []fixture.Transition{{From: string(row.From), To: string(row.To), Trigger: string(trigger)}}
				if got := fixture.TransitionsOf(t, pool, user); !slices.Equal(got, want) {
					t.Errorf("%s: logged %v, want %v", trigger, got, want)
				}
				var wantMsgs []string
				if k, ok := sm.KindFiredBy(trigger); ok && (!k.OnRequest || onRequest) {
					wantMsgs = []string{string(k.Message) + " " + k.CatalogKey}
				}
				var gotMsgs []string
				for _, m := range fixture.MessagesOf(t, pool, user) {
					gotMsgs = append(gotMsgs, m.Type+" "+*m.Key)
				}
				if !slices.Equal(gotMsgs, wantMsgs) {
					t.Errorf("%s: queued %q, want %q", trigger, gotMsgs, wantMsgs)
				}
			}
		})
	}
}

// The shard function (migration 20) puts every user in exactly one shard of
// any count, and a count of 1 is everyone.
func TestShardFunctionPartitionsUsers(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	for range 50 {
		fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	}
	for _, count := range []int{1, 2, 3, 7, MaxShards} {
		misplaced := fixture.Count(t, pool, `
			SELECT count(*) FROM user_engagement_states s
			 WHERE (SELECT count(*) FROM generate_series(0, $1 - 1) i
			         WHERE engagement_in_shard(s.user_id, i, $1)) <> 1`, count)
		if misplaced != 0 {
			t.Errorf("%d shards: %d users are not in exactly one", count, misplaced)
		}
	}
}
