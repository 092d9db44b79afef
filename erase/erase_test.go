package erase_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/erase"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The console calls Erase inside its own transaction, with its audit row:
// rolled back, nothing of the erase stays; committed, all of it.
func TestEraseInTheCallersTransaction(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	jid := "5511900000042@s.whatsapp.net"
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &jid})
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
		Params: `{"count":"2"}`, JID: jid})
	jids := func() int {
		return fixture.CountWhere(fixture.MessageRows(t, pool, fixture.Messages{}),
			func(m fixture.MessageRow) bool { return m.DestinationJID == jid })
	}

	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := erase.EraseWith(ctx, tx, user, erase.Options{Source: activity.SourceConsole, Actor: "ana"})
		if err != nil || rep.Messages != 1 || rep.Cancelled != 1 || !rep.OptedOut || !rep.Profile {
			t.Fatalf("erase: %+v, %v", rep, err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]int{false: 1, true: 0}[commit]
		if got := jids(); got != want {
			t.Errorf("commit %v: %d messages to the JID, want %d", commit, got, want)
		}
	}
	if ev := fixture.ConsentEventsOf(t, pool, user); len(ev) == 0 || ev[0].Source != activity.SourceConsole || !fixture.Is(ev[0].Actor, "ana") {
		t.Errorf("consent events %+v, want the console's, by ana", ev)
	}

	if _, err := erase.Erase(ctx, pool, "not-a-uuid"); !errors.Is(err, erase.ErrBadUserID) {
		t.Errorf("a bad id: %v, want ErrBadUserID", err)
	}
	if _, err := erase.Erase(ctx, pool, fixture.NewID()); !errors.Is(err, erase.ErrUnknownUser) ||
		!errors.Is(err, activity.ErrUnknownUser) {
		t.Errorf("nobody's id: %v, want ErrUnknownUser", err)
	}
	// A user the bot already deleted (no profile) whose messages remain is
	// still erased; there is nobody to opt out.
	fixture.DeleteProfile(t, pool, user)
	if rep, err := erase.Erase(ctx, pool, user); err != nil || rep.Profile || rep.OptedOut || rep.Messages != 1 {
		t.Errorf("erase without a profile: %+v, %v", rep, err)
	}
}
