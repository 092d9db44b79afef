package main_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
	"github.com/engagement-scheduler/engagement/verify"
)

// Issue 56, findings 3 and 4, at the last doors: messages the bot writes
// with its own SQL, which no enqueue check saw. queue-process holds each to
// the rule of every door before its request: a custom type (marketing
// unless declared) is cancelled for a user who opted out, anything for an
// erased user, a goodbye for a user held out of the current cycle (by the
// shipped engagement-daily). On the code before, all three were sent.
// verify then catches such sends whatever door they came through: the
// test writes them back as sent, as the code before recorded them, and
// no_send_after_opt_out and no_goodbye_to_holdout must name each.
func TestQueueProcessHoldsHandWrittenMessagesToTheRuleOfEveryDoor(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	now := fixture.Now(t, pool)
	optedOut := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour)})
	erased := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour)})
	heldOut := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-15 * 24 * time.Hour)})
	fine := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour)})
	fixture.BotOptOut(t, pool, optedOut, "bot")

	env := cmdtest.Env("DATABASE_URL="+url, "USER=ana")
	if res := cmdtest.Run(t, cmdtest.Build(t, "./cmd/engagement-daily"), env, "--holdout-percent", "100"); res.Code != 0 {
		t.Fatalf("engagement-daily: exit %d: %s", res.Code, res.Stderr)
	}
	ctl := cmdtest.Build(t, "./cmd/engagementctl")
	if res := cmdtest.Run(t, ctl, env, "erase", "--user-id", erased, "--yes"); res.Code != 0 {
		t.Fatalf("erase: exit %d: %s", res.Code, res.Stderr)
	}
	// The bot's own inserts, after the wishes.
	const jid = "5511900000001@s.whatsapp.net"
	ids := fixture.DueSends(t, pool, time.Time{},
		fixture.DueSend{User: optedOut, Type: "promo", CatalogKey: "engagement.weekly_review.celebration", Params: `{"count":"2"}`,
			JID: jid, Key: "opted-out", Ago: time.Minute},
		fixture.DueSend{User: erased, Type: "support_followup", CatalogKey: "engagement.weekly_review.celebration", Params: `{"count":"2"}`,
			JID: jid, Key: "erased", Ago: time.Minute},
		fixture.DueSend{User: heldOut, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select", Params: `{}`,
			JID: jid, Key: "held-out", Ago: time.Minute},
		fixture.DueSend{User: fine, Type: "promo", CatalogKey: "engagement.weekly_review.celebration", Params: `{"count":"2"}`,
			JID: jid, Key: "fine", Ago: time.Minute})

	bot := webhooktest.New(t)
	res := cmdtest.Run(t, binary(t), cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook",
		"ENGAGEMENT_WEBHOOK_URL="+bot.URL, "ENGAGEMENT_WEBHOOK_SECRET=doors-s3cr3t"), "--send-interval", "0")
	if res.Code != 0 {
		t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
	}
	var keys []string
	for _, r := range bot.Requests() {
		keys = append(keys, r.IdempotencyKey)
	}
	if !slices.Equal(keys, []string{"fine"}) {
		t.Errorf("the receiver got %v, want only the message to the user who said nothing", keys)
	}
	got := outcomes(t, pool, func(m fixture.MessageRow) string {
		if m.JobRunID != nil {
			return ""
		}
		return m.Key()
	}, func(m fixture.MessageRow) string {
		if m.ErrorMessage != nil {
			return statusText(m) + " " + *m.ErrorMessage
		}
		return statusText(m)
	})
	want := map[string]string{"opted-out": "cancelled:opted_out", "erased": "cancelled:erased", "held-out": "cancelled:holdout", "fine": "sent"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("message %s: %s, want %s", k, got[k], w)
		}
	}

	// What the code before did: each sent, within a minute of being queued
	// (inside the grace verify gives a send that had started before the
	// wish: these were queued after it). verify must name all three.
	sentAt := fixture.Now(t, pool).Add(time.Minute)
	for _, key := range []string{"opted-out", "erased", "held-out"} {
		fixture.SetMessages(t, pool, fixture.MessageChange{ID: ids[key], SetStatus: "sent", CancelReason: fixture.Ptr(""), SentAt: sentAt})
	}
	out := cmdtest.Run(t, ctl, env, "verify", "--output", "json", "--as-of", now.Add(time.Hour).Format(time.RFC3339))
	var rep struct {
		Checks []struct {
			Name       string `json:"name"`
			Violations int64  `json:"violations"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out.Stdout), &rep); err != nil {
		t.Fatalf("verify --output json: exit %d, %v: %q %s", out.Code, err, out.Stdout, out.Stderr)
	}
	violations := map[string]int64{}
	for _, c := range rep.Checks {
		violations[c.Name] = c.Violations
	}
	if violations[verify.CheckNoSendAfterOptOut] != 2 || violations[verify.CheckNoGoodbyeToHoldout] != 1 || out.Code != 4 {
		t.Errorf("verify: exit %d, %s %d and %s %d violations; want exit 4, 2 (the promo, the erased user's follow-up) and 1",
			out.Code, verify.CheckNoSendAfterOptOut, violations[verify.CheckNoSendAfterOptOut],
			verify.CheckNoGoodbyeToHoldout, violations[verify.CheckNoGoodbyeToHoldout])
	}
}
