package main_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
)

// Issue 17, point 3: "After a receiver outage, requeued messages are
// delivered once, under the key they first carried." The real binaries:
// queue-process against a webhook that answers 500 until its outage ends,
// so every message fails after its retries; engagementctl requeue; a second
// queue-process delivers each message exactly once, with the
// Idempotency-Key of its first attempts. A message the receiver rejected
// for good (422) is left failed by the --error-contains filter.
func TestRequeueAfterAReceiverOutageDeliversOnceUnderTheFirstKey(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	bot := webhooktest.New(t)
	down := webhooktest.Status(500, `{"error":"receiver down"}`)

	const n = 6
	keys := make([]string, n)
	for i := range keys {
		user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), Locale: "en"})
		keys[i] = user + ":weekly_review:2026-W10"
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
			Params: `{"count":"2"}`, JID: "5511999990000@s.whatsapp.net", ScheduledFor: fixture.Now(t, pool).Add(-time.Minute), Key: keys[i]})
		// Down for the first run's two attempts (one try, one retry), up after.
		bot.Script(keys[i], down, down, webhooktest.OK())
	}
	rejected := keys[n-1]
	bot.Script(rejected, webhooktest.Status(422, `{"error":"bad number"}`), webhooktest.OK())

	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL)
	process := func() {
		t.Helper()
		res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0", "--retry-base", "10ms", "--max-retries", "1", "--output", "json")
		if res.Code != 0 {
			t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
		}
	}
	process()
	if got := fixture.CountMessages(t, pool, fixture.Messages{Status: "failed"}); got != n {
		t.Fatalf("%d messages failed during the outage, want all %d", got, n)
	}
	firstKeys := map[string]string{} // the Idempotency-Key each message first carried
	for _, k := range keys {
		reqs := bot.ByKey(k)
		if len(reqs) == 0 {
			t.Fatalf("no attempt for %s during the outage", k)
		}
		firstKeys[k] = reqs[0].IdempotencyKey
	}

	res := cmdtest.Exec(t, ctl.NewCommand, env, "requeue", "--error-contains", "HTTP 500", "--output", "json")
	var out struct {
		Requeued int  `json:"requeued"`
		DryRun   bool `json:"dry_run"`
	}
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &out) != nil || out.Requeued != n-1 || out.DryRun {
		t.Fatalf("requeue: exit %d, %q (%s); want %d requeued", res.Code, res.Stdout, res.Stderr, n-1)
	}

	process()
	process() // nothing left: a second run sends nothing again
	for _, k := range keys {
		reqs := bot.ByKey(k)
		want := 3 // two attempts in the outage, one after the requeue
		if k == rejected {
			want = 1
		}
		if len(reqs) != want {
			t.Errorf("%s: the receiver got %d requests, want %d", k, len(reqs), want)
		}
		for i, r := range reqs {
			if r.IdempotencyKey != firstKeys[k] || r.IdempotencyKey != k {
				t.Errorf("%s: request %d carried Idempotency-Key %q, want the first one, %q", k, i+1, r.IdempotencyKey, k)
			}
		}
		m := fixture.MessageByKey(t, pool, k)
		status, retries := m.Status, m.RetryCount
		wantStatus := "sent"
		if k == rejected {
			wantStatus = "failed"
		}
		if status != wantStatus || retries != 0 {
			t.Errorf("%s: %s with retry_count %d, want %s with 0", k, status, retries, wantStatus)
		}
	}
	if got := fixture.CountMessages(t, pool, fixture.Messages{}); got != n {
		t.Errorf("%d messages in the queue, want still %d: requeue never adds one", got, n)
	}

	// A requeued message is checked again when claimed: one cancelled
	// because its user opted out, requeued while they still are, is
	// cancelled again and never reaches the receiver.
	optedOut := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), OptedOut: true})
	optedOutKey := optedOut + ":weekly_review:2026-W10"
	fixture.Queue(t, pool, fixture.Message{User: optedOut, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
		Params: `{"count":"2"}`, JID: "5511999990000@s.whatsapp.net", ScheduledFor: fixture.Now(t, pool).Add(-time.Minute),
		Key: optedOutKey, Status: "cancelled", CancelReason: "opted_out"})
	res = cmdtest.Exec(t, ctl.NewCommand, env, "requeue", "--status", "cancelled", "--reason", "opted_out")
	if res.Code != 0 || res.Stdout != "requeued 1 cancelled messages\n" {
		t.Fatalf("requeue --status cancelled: exit %d, %q (%s)", res.Code, res.Stdout, res.Stderr)
	}
	process()
	m := fixture.MessageByKey(t, pool, optedOutKey)
	status, reason := m.Status, ""
	if m.CancelReason != nil {
		reason = *m.CancelReason
	}
	if status != "cancelled" || reason != "opted_out" || len(bot.ByKey(optedOutKey)) != 0 {
		t.Errorf("the opted-out user's requeued review: %s (%s), %d requests; want cancelled again as opted_out, never sent",
			status, reason, len(bot.ByKey(optedOutKey)))
	}
}
