package activity_test

import (
	"context"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

func TestActiveUsersLastWeekAndActivityCount(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	asOf := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	day := 24 * time.Hour

	buyer := fixture.User(t, tx, fixture.UserOptions{LastActivity: asOf.Add(-20 * day), Locale: "en"})
	fixture.Transactions(t, tx, buyer, asOf.Add(-day), asOf.Add(-2*day), asOf.Add(-9*day))
	talker := fixture.User(t, tx, fixture.UserOptions{State: "help_flow", LastActivity: asOf.Add(-day)})
	fixture.User(t, tx, fixture.UserOptions{LastActivity: asOf.Add(-day), OptedOut: true})
	fixture.User(t, tx, fixture.UserOptions{State: "dormant", LastActivity: asOf.Add(-day)})
	fixture.User(t, tx, fixture.UserOptions{LastActivity: asOf.Add(-8 * day)})

	got := map[string]activity.ActiveUser{}
	for u, err := range activity.ActiveUsersLastWeek(ctx, tx, asOf) {
		if err != nil {
			t.Fatal(err)
		}
		got[u.UserID] = u
	}
	if len(got) != 2 {
		t.Fatalf("active users = %v, want the buyer and the talker", got)
	}
	if b := got[buyer]; b.Transactions != 2 || b.State != "active" || b.Locale != "en" || b.Destination != "individual" || b.DestinationJID == "" {
		t.Errorf("buyer = %+v, want 2 transactions in the window, active, en, an individual JID", b)
	}
	if tk := got[talker]; tk.Transactions != 0 || tk.State != "help_flow" {
		t.Errorf("talker = %+v, want 0 transactions, help_flow", tk)
	}

	for _, c := range []struct{ days, want int }{{7, 2}, {2, 1}, {1, 0}, {30, 3}, {0, 0}} {
		n, err := activity.ActivityCount(ctx, tx, buyer, c.days, asOf)
		if err != nil || n != c.want {
			t.Errorf("ActivityCount(%d days) = %d, %v; want %d", c.days, n, err, c.want)
		}
	}
	if _, err := activity.ActivityCount(ctx, tx, buyer, -1, asOf); err == nil {
		t.Error("ActivityCount with negative days: no error")
	}
}
