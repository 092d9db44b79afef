package activity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// TestFireRefusesAnInstantTheBotCannotMean (issue 42, finding 2): an
// instant of infinity, -infinity, 9999-12-31 or a JavaScript timestamp
// taken as milliseconds though it is microseconds (the year 58874) was
// stored as the user's last activity, and the user never got a goodbye
// again. Each is refused with EN005 (ErrInstantOutOfRange) and changes
// nothing; an instant within the clock skew, and one in the past, are
// moves as before.
func TestFireRefusesAnInstantTheBotCannotMean(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	now := fixture.Now(t, tx)
	last := now.Add(-20 * 24 * time.Hour).Truncate(time.Microsecond)
	user := userIn(t, tx, sm.GoodbyeSent, last)

	for _, raw := range []string{"infinity", "-infinity", "9999-12-31 00:00:00+00", "58874-01-01 00:00:00+00", "1970-01-01 00:00:00+00"} {
		err := pgx.BeginFunc(ctx, tx, func(tx pgx.Tx) error {
			return fixture.ActivityFireAtText(ctx, tx, user, string(sm.GoodbyeAnswerRemindLater), raw)
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != activity.SQLStateInstantOutOfRange {
			t.Errorf("engagement_fire at %s: %v, want SQLSTATE %s", raw, err, activity.SQLStateInstantOutOfRange)
		}
	}
	for _, at := range []time.Time{now.Add(activity.MaxFireSkew + time.Minute), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)} {
		if _, err := fireIn(ctx, tx, user, sm.GoodbyeAnswerRemindLater, activity.FireOptions{At: at}); !errors.Is(err, activity.ErrInstantOutOfRange) {
			t.Errorf("Fire at %s: %v, want ErrInstantOutOfRange", at, err)
		}
	}
	st := fixture.StateOf(t, tx, user)
	if st.State != string(sm.GoodbyeSent) || !st.LastActivityAt.Equal(last) {
		t.Errorf("after the refused calls the user is %s, last active %s; want goodbye_sent, %s", st.State, st.LastActivityAt, last)
	}
	if n := len(fixture.TransitionsOf(t, tx, user)); n != 0 {
		t.Errorf("%d transitions logged by refused calls, want 0", n)
	}

	// Within the clock skew: a move.
	at := now.Add(activity.MaxFireSkew - time.Minute)
	if got, err := fireIn(ctx, tx, user, sm.UserMessage, activity.FireOptions{At: at}); err != nil || got != sm.Active {
		t.Errorf("Fire within the clock skew: %q, %v; want active", got, err)
	}
}

// TestFireRepairsAnActivityInTheFuture: a last activity stored in the
// future before the check existed (or written by hand) no longer outlives
// every later call: the next move's instant replaces it, so the user can
// get a goodbye again.
func TestFireRepairsAnActivityInTheFuture(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	now := fixture.Now(t, tx)
	user := userIn(t, tx, sm.Active, now.Add(-time.Hour))
	fixture.SetState(t, tx, user, fixture.StateChange{LastActivity: time.Date(58874, 1, 1, 0, 0, 0, 0, time.UTC)})
	at := now.Add(-time.Minute).Truncate(time.Microsecond)
	if _, err := fireIn(ctx, tx, user, sm.UserMessage, activity.FireOptions{At: at}); err != nil {
		t.Fatal(err)
	}
	if got := fixture.StateOf(t, tx, user).LastActivityAt; !got.Equal(at) {
		t.Errorf("last activity after a move at %s: %s, want the move's instant", at, got)
	}
}

// TestFireRequestKeyIsOneUsers (issue 42, finding 3): the same request key
// on another user's move returned the first user's state, without an
// error, and did not move the second user. It is refused with EN006
// (ErrRequestKeyOfAnotherUser), changing nothing; the first user's retry
// with the key is still a no-op answered with their state.
func TestFireRequestKeyIsOneUsers(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	now := fixture.Now(t, tx)
	first := userIn(t, tx, sm.GoodbyeSent, now.Add(-20*24*time.Hour))
	second := userIn(t, tx, sm.GoodbyeSent, now.Add(-20*24*time.Hour))
	if st, err := fireIn(ctx, tx, first, sm.GoodbyeAnswerHelp, activity.FireOptions{RequestKey: "wamid.shared"}); err != nil || st != sm.HelpFlow {
		t.Fatalf("first user's call: %q, %v", st, err)
	}
	st, err := fireIn(ctx, tx, second, sm.GoodbyeAnswerDormant, activity.FireOptions{RequestKey: "wamid.shared"})
	if !errors.Is(err, activity.ErrRequestKeyOfAnotherUser) {
		t.Errorf("the key on another user's move: %q, %v; want ErrRequestKeyOfAnotherUser", st, err)
	}
	if got := fixture.StateOf(t, tx, second).State; got != string(sm.GoodbyeSent) {
		t.Errorf("the second user is %s, want goodbye_sent (unchanged)", got)
	}
	if st, err := fireIn(ctx, tx, first, sm.GoodbyeAnswerHelp, activity.FireOptions{RequestKey: "wamid.shared"}); err != nil || st != sm.HelpFlow {
		t.Errorf("the first user's retry: %q, %v; want help_flow, no error", st, err)
	}
}
