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
	if _, err := pool.Exec(ctx, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for)
		VALUES ($1, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual', $2, now())`,
		user, jid); err != nil {
		t.Fatal(err)
	}
	jids := func() int {
		return fixture.Count(t, pool, `SELECT count(*) FROM engagement_message_queue WHERE destination_jid = '`+jid+`'`)
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
	var source, actor string
	if err := pool.QueryRow(ctx, `SELECT source, actor FROM engagement_consent_events WHERE user_id = $1`, user).
		Scan(&source, &actor); err != nil || source != activity.SourceConsole || actor != "ana" {
		t.Errorf("consent event from %q by %q (%v), want the console's, by ana", source, actor, err)
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
	if _, err := pool.Exec(ctx, `DELETE FROM user_profiles WHERE user_id = $1`, user); err != nil {
		t.Fatal(err)
	}
	if rep, err := erase.Erase(ctx, pool, user); err != nil || rep.Profile || rep.OptedOut || rep.Messages != 1 {
		t.Errorf("erase without a profile: %+v, %v", rep, err)
	}
}
