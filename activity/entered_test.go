package activity_test

import (
	"context"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// When a user entered their state (state_entered_at, the StateEntered
// clock) is business time, whoever moves them: the bot's move at its
// instant, a move of the user's own row written by hand at the write's
// time, and a write that changes no state leaves it alone. A timer counting
// from it (engagement_clock 'state_entered') reads exactly that.
func TestStateEnteredIsTheMovesTime(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	entered := func(user string) time.Time {
		t.Helper()
		return fixture.ActivityStateEntered(t, pool, user)
	}
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC) // months before the test runs
	user := userIn(t, pool, sm.GoodbyeSent, at.Add(-20*24*time.Hour))

	if _, err := activity.Fire(ctx, pool, user, sm.GoodbyeAnswerDormant, activity.FireOptions{At: at}); err != nil {
		t.Fatal(err)
	}
	if got := entered(user); !got.Equal(at) {
		t.Errorf("after the bot's move at %v, the state was entered at %v", at, got)
	}

	// A write that changes no state (the bot recording activity) is not an
	// entry.
	fixture.SetState(t, pool, user, fixture.StateChange{LastActivity: fixture.Now(t, pool)})
	if got := entered(user); !got.Equal(at) {
		t.Errorf("a write without a move changed the state's entry to %v", got)
	}

	// A bot that writes the state itself, without engagement_fire, gets
	// its write's time.
	now := fixture.SetState(t, pool, user, fixture.StateChange{State: "active"})
	if got := entered(user); !got.Equal(now) {
		t.Errorf("a hand-written move entered the state at %v, want the write's time %v", got, now)
	}

	// A row from before the column (NULL) counts from its last change of
	// state.
	fixture.SetState(t, pool, user, fixture.StateChange{NoStateEntered: true, StateChanged: at})
	if got := entered(user); !got.Equal(at) {
		t.Errorf("a row without state_entered_at entered its state at %v, want its state_changed_xact_at %v", got, at)
	}
}
