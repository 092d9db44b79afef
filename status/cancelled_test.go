package status_test

import (
	"context"
	"slices"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/seeded"
	"github.com/engagement-scheduler/engagement/status"
)

// Issue 17, point 4: status counts cancelled messages by reason, every
// known reason listed (0 included), and those cancelled without one (before
// reasons were recorded) as "unspecified".
func TestStatusCountsCancelledByReason(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: seeded.AsOf})
	for _, r := range []string{"opted_out", "opted_out", "stale", "operator", ""} { // "": cancelled without a reason (NULL)
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", Status: "cancelled", CancelReason: r})
	}
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", Status: "sent"})

	st, err := status.Read(context.Background(), pool, seeded.AsOf, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []status.ReasonCount{{Reason: "opted_out", Messages: 2}, {Reason: "stale", Messages: 1},
		{Reason: "no_user", Messages: 0}, {Reason: "operator", Messages: 1}, {Reason: "frequency", Messages: 0},
		{Reason: "erased", Messages: 0}, {Reason: "holdout", Messages: 0},
		{Reason: "us_marketing_blocked", Messages: 0}, {Reason: "reachout_window", Messages: 0}, {Reason: status.ReasonUnspecified, Messages: 1}}
	if !slices.Equal(st.Queue.CancelledByReason, want) {
		t.Errorf("cancelled by reason %+v, want %+v", st.Queue.CancelledByReason, want)
	}
}
