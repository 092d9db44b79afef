package main_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
)

const day = 24 * time.Hour

// queueKeyed queues a due message of type for user under key (a weekly
// review's template, which every transport here can send).
func queueKeyed(t *testing.T, pool *pgxpool.Pool, user, typ, key string) {
	t.Helper()
	fixture.DueSends(t, pool, time.Time{}, fixture.DueSend{User: user, Type: typ, CatalogKey: "engagement.weekly_review.celebration",
		Params: `{"count":"2"}`, JID: "5511988887777@s.whatsapp.net", Key: key, Ago: time.Minute})
}

// webhookRun runs the shipped queue-process on the webhook to bot, with
// extra environment and flags, and returns its summary.
func webhookRun(t *testing.T, url string, bot *webhooktest.Bot, env []string, args ...string) (sum struct {
	Sent          int            `json:"sent"`
	CancelReasons map[string]int `json:"cancel_reasons"`
},
) {
	t.Helper()
	env = cmdtest.Env(append([]string{"DATABASE_URL=" + url, "ENGAGEMENT_TRANSPORT=webhook",
		"ENGAGEMENT_WEBHOOK_URL=" + bot.URL, "ENGAGEMENT_WEBHOOK_SECRET=reach-s3cr3t"}, env...)...)
	res := cmdtest.Run(t, binary(t), env, append([]string{"--send-interval", "0", "--output", "json"}, args...)...)
	if res.Code != 0 {
		t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
	}
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatalf("summary %q: %v", res.Stdout, err)
	}
	return sum
}

func requestedKeys(bot *webhooktest.Bot) []string {
	var keys []string
	for _, r := range bot.Requests() {
		keys = append(keys, r.IdempotencyKey)
	}
	slices.Sort(keys)
	return keys
}

// Issue 58 (../shared/CONTRACT.md, round seven, "An unofficial number's
// limits"): on the webhook, a user silent 40 days gets nothing, whatever
// the message's type (a weekly review, a kind; an account notice, a type
// of none, queued by the bot's own SQL): each is cancelled with the reason
// reachout_window, no request made. A user silent 2 days gets theirs.
// engagementctl status counts the cancelled two. Before, all three went.
func TestWebhookSendsNothingPastTheReachoutWindow(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	now := fixture.Now(t, pool)
	silent40 := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-40 * day)})
	silent2 := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-2 * day)})
	queueKeyed(t, pool, silent40, "weekly_review", "silent40-review")
	queueKeyed(t, pool, silent40, "account_notice", "silent40-notice")
	queueKeyed(t, pool, silent2, "account_notice", "silent2-notice")

	bot := webhooktest.New(t)
	sum := webhookRun(t, url, bot, nil)
	if got := requestedKeys(bot); !slices.Equal(got, []string{"silent2-notice"}) {
		t.Errorf("the receiver got %v; want only the message to the user silent 2 days", got)
	}
	if sum.Sent != 1 || sum.CancelReasons["reachout_window"] != 2 {
		t.Errorf("summary: %d sent, cancelled %v; want 1 sent and 2 reachout_window", sum.Sent, sum.CancelReasons)
	}
	got := outcomes(t, pool, byKey, statusText)
	want := map[string]string{"silent40-review": "cancelled:reachout_window", "silent40-notice": "cancelled:reachout_window",
		"silent2-notice": "sent"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("message %s: %s, want %s", k, got[k], w)
		}
	}
	if n := reasonInStatus(t, url, "reachout_window"); n != 2 {
		t.Errorf("engagementctl status counts %d reachout_window cancels; want 2", n)
	}
}

// reasonInStatus is the count engagementctl status --output json gives
// the cancel reason.
func reasonInStatus(t *testing.T, url, reason string) int {
	t.Helper()
	res := cmdtest.Run(t, cmdtest.Build(t, "./cmd/engagementctl"), cmdtest.Env("DATABASE_URL="+url), "status", "--output", "json")
	var st struct {
		Queue struct {
			CancelledByReason []struct {
				Reason   string `json:"reason"`
				Messages int    `json:"messages"`
			} `json:"cancelled_by_reason"`
		} `json:"queue"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("status: exit %d, %v: %q %s", res.Code, err, res.Stdout, res.Stderr)
	}
	for _, r := range st.Queue.CancelledByReason {
		if r.Reason == reason {
			return r.Messages
		}
	}
	t.Fatalf("status lists no %s among %+v", reason, st.Queue.CancelledByReason)
	return 0
}

// Issue 58: --reachout-window 0 turns the window off (the user silent 40
// days gets theirs), and ENGAGEMENT_REACHOUT_WINDOW sets it (24h: the user
// silent 2 days is past it).
func TestReachoutWindowIsSetOrTurnedOff(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	now := fixture.Now(t, pool)
	silent40 := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-40 * day)})
	silent2 := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-2 * day)})
	bot := webhooktest.New(t)

	queueKeyed(t, pool, silent40, "account_notice", "off")
	if sum := webhookRun(t, url, bot, nil, "--reachout-window", "0"); sum.Sent != 1 || len(sum.CancelReasons) != 0 {
		t.Errorf("--reachout-window 0: %d sent, cancelled %v; want the one sent", sum.Sent, sum.CancelReasons)
	}
	queueKeyed(t, pool, silent2, "account_notice", "a-day")
	if sum := webhookRun(t, url, bot, []string{"ENGAGEMENT_REACHOUT_WINDOW=24h"}); sum.CancelReasons["reachout_window"] != 1 {
		t.Errorf("ENGAGEMENT_REACHOUT_WINDOW=24h: cancelled %v; want the user silent 2 days' message cancelled", sum.CancelReasons)
	}
	if got := requestedKeys(bot); !slices.Equal(got, []string{"off"}) {
		t.Errorf("the receiver got %v; want only the message sent with the window off", got)
	}
}

// Issue 58: the window is read on the run's clock. engagement-daily queues
// a goodbye at 15 days of silence; a backlog holds it two weeks (the next
// queue-process, --as-of 14 days on: the user is 29 days silent). It is
// cancelled, reachout_window, and never requested. Before, it went.
func TestAGoodbyeThatWaitsPastDay28IsCancelled(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	now := fixture.Now(t, pool)
	fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-15 * day)})
	if res := cmdtest.Run(t, cmdtest.Build(t, "./cmd/engagement-daily"), cmdtest.Env("DATABASE_URL="+url)); res.Code != 0 {
		t.Fatalf("engagement-daily: exit %d: %s", res.Code, res.Stderr)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Type: "goodbye"}); n != 1 {
		t.Fatalf("engagement-daily queued %d goodbyes; want 1", n)
	}
	bot := webhooktest.New(t)
	sum := webhookRun(t, url, bot, nil, "--as-of", now.Add(14*day).UTC().Format(time.RFC3339), "--allow-future-as-of")
	if len(bot.Requests()) != 0 || sum.CancelReasons["reachout_window"] != 1 {
		t.Errorf("%d requests, cancelled %v; want none, and the goodbye cancelled reachout_window", len(bot.Requests()), sum.CancelReasons)
	}
	// The next days' runs take the goodbye as undelivered and do not queue
	// another: it would be cancelled the same way every day until the user
	// writes (statemachine.UntilTheUserWrites). Before, a new goodbye was
	// queued (and cancelled) each day.
	daily := cmdtest.Build(t, "./cmd/engagement-daily")
	for d := 14; d <= 17; d++ {
		res := cmdtest.Run(t, daily, cmdtest.Env("DATABASE_URL="+url),
			"--as-of", now.Add(time.Duration(d)*day).UTC().Format(time.RFC3339), "--allow-future-as-of")
		if res.Code != 0 {
			t.Fatalf("engagement-daily, day %d: exit %d: %s", d, res.Code, res.Stderr)
		}
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Type: "goodbye"}); n != 1 {
		t.Errorf("%d goodbyes queued in all; want the first alone, until the user writes", n)
	}
}

// Issue 58: nothing changes on the Cloud API. A user silent 40 days is
// sent their message (a template reaches a user however long ago they
// wrote), whatever --reachout-window says.
func TestTheCloudAPIIgnoresTheReachoutWindow(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	asOf := fixture.Now(t, pool).Add(time.Hour).Truncate(time.Second)
	silent40 := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-40 * day)})
	queueTo(t, pool, silent40, "account_notice", "engagement.reminder.come_back", "5511988886666")
	queueTo(t, pool, silent40, "weekly_review", "engagement.weekly_review.celebration", "5511988887777")

	env := append(routeEnv(t, url, g, false), "ENGAGEMENT_REACHOUT_WINDOW=24h")
	sum := runQueue(t, env, asOf)
	if sum.Sent != 2 || sum.Cancelled != 0 {
		t.Errorf("summary: %d sent, cancelled %v; want both sent", sum.Sent, sum.CancelReasons)
	}
	if got := len(g.Recipients()); got != 2 {
		t.Errorf("Meta got %d requests; want 2", got)
	}
	if cancelled := fixture.CountMessages(t, pool, fixture.Messages{Status: "cancelled"}); cancelled != 0 {
		t.Errorf("%d messages cancelled; want none", cancelled)
	}
}
