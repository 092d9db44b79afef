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

// userAt makes a user in timer t's from-state whose timer runs out at
// instant at: the time t's clock names is at − t's wait, every other time
// recent. It is built from the timer's clock alone, so a new timer of the
// state machine's table needs no edit here.
func userAt(tb testing.TB, t sm.Transition, asOf, at time.Time) fixture.UserOptions {
	tb.Helper()
	since := at.Add(-t.Wait)
	u := fixture.UserOptions{State: string(t.From), LastActivity: asOf.Add(-time.Hour), StateEnteredAt: fixture.Ptr(asOf.Add(-time.Hour))}
	switch t.Clock {
	case sm.LastActivity:
		u.LastActivity = since
	case sm.RemindAt:
		u.RemindAt = &since
	case sm.StateEntered:
		u.StateEnteredAt = &since
	case sm.GoodbyeDelivered:
		// No goodbye in the queue: the timer counts from goodbye_sent_at,
		// its expiry the wait later.
		u.GoodbyeSentAt, u.GoodbyeExpiresAt = &since, fixture.Ptr(at)
		u.LastActivity = since.Add(-sm.InactivityPeriod)
	default:
		tb.Fatalf("timer %s: no user can be made for clock %q: teach userAt the clock", t.Trigger, t.Clock)
	}
	return u
}

// Each daily step does what the state machine's tables say, read from the
// database after a real run: for every timer of the table, a user whose
// timer ran out an hour before as-of moves along the table's row, the move
// is logged as that row, and the kind the trigger queues
// (statemachine.Kinds) is queued under its key, exactly when the tables
// say so (a kind queued on request only when asked); a user whose timer
// runs out an hour after as-of is left as they are. The test is driven by
// the table: a new timer needs no edit here.
func TestDailyStepsFollowTheStateMachine(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 11, 18, 12, 0, 0, 0, time.UTC)
	steps, err := dailySteps(asOf, Config{})
	if err != nil {
		t.Fatal(err)
	}
	var names, timers []string
	for _, st := range steps {
		names = append(names, st.name)
	}
	for _, tr := range sm.Timers() {
		timers = append(timers, string(tr.Trigger))
	}
	if !slices.Equal(names, timers) {
		t.Errorf("daily steps %q, want one per timer of the table, %q", names, timers)
	}

	for _, onRequest := range []bool{false, true} {
		t.Run(fmt.Sprintf("send_reminder=%v", onRequest), func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			due, notYet := map[sm.Transition]string{}, map[sm.Transition]string{}
			for _, tr := range sm.Timers() {
				due[tr] = fixture.User(t, pool, userAt(t, tr, asOf, asOf.Add(-time.Hour)))
				notYet[tr] = fixture.User(t, pool, userAt(t, tr, asOf, asOf.Add(time.Hour)))
			}
			_, err := RunDaily(context.Background(), pool, Config{AsOf: asOf, SendReminder: onRequest, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			for row, user := range due {
				got := fixture.StateOf(t, pool, user)
				if got.State != string(row.To) {
					t.Errorf("%s: user in %s, want the table's %s", row.Trigger, got.State, row.To)
				}
				if at := fixture.StateRows(t, pool, user)[0].StateEnteredAt; at == nil || !at.Equal(asOf) {
					t.Errorf("%s: state_entered_at is not the run's as-of %v (business time)", row.Trigger, asOf)
				}
				want := []fixture.Transition{{From: string(row.From), To: string(row.To), Trigger: string(row.Trigger)}}
				if got := fixture.TransitionsOf(t, pool, user); !slices.Equal(got, want) {
					t.Errorf("%s: logged %v, want %v", row.Trigger, got, want)
				}
				var wantMsgs []string
				if k, ok := sm.KindFiredBy(row.Trigger); ok && (!k.OnRequest || onRequest) {
					wantMsgs = []string{string(k.Message) + " " + k.CatalogKey}
				}
				var gotMsgs []string
				for _, m := range fixture.MessagesOf(t, pool, user) {
					gotMsgs = append(gotMsgs, m.Type+" "+*m.Key)
				}
				if !slices.Equal(gotMsgs, wantMsgs) {
					t.Errorf("%s: queued %q, want %q", row.Trigger, gotMsgs, wantMsgs)
				}
			}
			for row, user := range notYet {
				if got := fixture.StateOf(t, pool, user).State; got != string(row.From) {
					t.Errorf("%s: a user whose timer runs out an hour after as-of moved to %s", row.Trigger, got)
				}
				if got := fixture.TransitionsOf(t, pool, user); len(got) != 0 {
					t.Errorf("%s: a user whose timer runs out an hour after as-of was logged %v", row.Trigger, got)
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
	fixture.InactiveUsers(t, pool, 50, time.Now())
	for _, count := range []int{1, 2, 3, 7, MaxShards} {
		misplaced := fixture.MisplacedInShards(t, pool, count)
		if misplaced != 0 {
			t.Errorf("%d shards: %d users are not in exactly one", count, misplaced)
		}
	}
}
