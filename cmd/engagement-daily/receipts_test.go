package main_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// goodbyeSent makes a user whose goodbye went out at sentAt: state
// goodbye_sent since then, and the goodbye in the queue, sent (accepted)
// at sentAt with a provider id.
func goodbyeSent(t *testing.T, pool *pgxpool.Pool, providerID string, sentAt time.Time) string {
	t.Helper()
	user := fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: sentAt.Add(-15 * 24 * time.Hour),
		GoodbyeSentAt: &sentAt, GoodbyeExpiresAt: fixture.Ptr(sentAt.Add(48 * time.Hour))})
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.default",
		JID: "5511999990000@s.whatsapp.net", ScheduledFor: sentAt, Key: fixture.Goodbye.Key(user, sentAt),
		Status: "sent", SentAt: sentAt, ProviderID: providerID})
	return user
}

// Issue 43: the goodbye's 48 hours count from its delivery, and a goodbye
// WhatsApp failed after accepting it times nobody out. Three goodbyes
// accepted 60 hours before the run: one delivered 30 hours after (a phone
// that was off), one failed after acceptance (131049, Meta's per-user
// marketing limit), one with no receipt. The real daily job makes the
// first wait until 48 hours after its delivery (before, it went dormant
// 12 hours early), sends the second back to active (goodbye_undelivered),
// and times the third out on its acceptance as before; verify finds
// nothing stuck in between.
func TestGoodbyeWindowCountsFromDelivery(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	ctx := context.Background()
	now := fixture.Now(t, pool).Truncate(time.Second)
	sentAt := now.Add(-60 * time.Hour)
	late := goodbyeSent(t, pool, "wamid.late", sentAt)
	failed := goodbyeSent(t, pool, "wamid.failed", sentAt)
	silent := goodbyeSent(t, pool, "wamid.silent", sentAt)
	if _, _, err := activity.Receipt(ctx, pool, "wamid.late", activity.ReceiptDelivered, activity.ReceiptOptions{At: sentAt.Add(30 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := activity.Receipt(ctx, pool, "wamid.failed", activity.ReceiptFailed, activity.ReceiptOptions{ErrorCode: "131049"}); err != nil {
		t.Fatal(err)
	}
	env := cmdtest.Env("DATABASE_URL=" + url)
	ctl := cmdtest.Build(t, "./cmd/engagementctl")
	run := func(asOf time.Time) {
		t.Helper()
		res := cmdtest.Run(t, binary(t), env, "--as-of", asOf.UTC().Format(time.RFC3339), "--allow-future-as-of", "--output", "json")
		if res.Code != 0 {
			t.Fatalf("engagement-daily --as-of %s: exit %d: %s", asOf, res.Code, res.Stderr)
		}
		if v := cmdtest.Run(t, ctl, env, "verify", "--as-of", asOf.UTC().Format(time.RFC3339)); v.Code != 0 {
			t.Errorf("verify --as-of %s after the run: exit %d: %s%s", asOf, v.Code, v.Stdout, v.Stderr)
		}
	}

	run(now)
	for user, want := range map[string]string{late: "goodbye_sent", failed: "active", silent: "dormant"} {
		if got := fixture.StateOf(t, pool, user).State; got != want {
			t.Errorf("after the run 60 h after the goodbyes: %s is %s, want %s", user, got, want)
		}
	}
	if got := lastTrigger(t, pool, failed); got != "goodbye_undelivered" {
		t.Errorf("the late failure's user moved by %q, want goodbye_undelivered", got)
	}

	// 48 hours after the delivery, and an hour: the late one's time is up.
	run(sentAt.Add(30*time.Hour + 49*time.Hour))
	if got := fixture.StateOf(t, pool, late).State; got != "dormant" {
		t.Errorf("48 h after its delivery the late goodbye's user is %s, want dormant", got)
	}
}

func lastTrigger(t *testing.T, pool *pgxpool.Pool, user string) string {
	t.Helper()
	logs := fixture.LogRows(t, pool, fixture.Logged{Users: []string{user}})
	if len(logs) == 0 {
		t.Fatalf("no move of %s logged", user)
	}
	return logs[len(logs)-1].Trigger
}
