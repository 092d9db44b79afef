package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
	"github.com/engagement-scheduler/engagement/migrations"
)

// TestTheJobsRunOnTheBotsDatabase: issue 30. The whole flow on the bot's
// own database, with the rows its earlier scheduler left
// (internal/testkit/botdb/testdata/bot-rows.sql): migrate up adopts it
// without changing a row, then daily, weekly and queue-process move every
// kind of user as the README says and deliver each due message once (the
// old scheduler's pending goodbye included, its 48 hours counted from that
// delivery), verify passes, status and cleanup run, requeue revives the
// old scheduler's failed review, and a second migrate up is a no-op.
func TestTheJobsRunOnTheBotsDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	asOf := time.Now().UTC().Truncate(time.Second)
	url := botdb.NewDatabaseWithRows(t, asOf)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	bot := webhooktest.New(t)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL)
	run := func(newCmd func() *cobra.Command, args ...string) map[string]any {
		t.Helper()
		res := cmdtest.Exec(t, newCmd, env, append(args, "--output", "json")...)
		var sum map[string]any
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &sum) != nil {
			t.Fatalf("%s %v: exit %d\nstdout %s\nstderr %s", newCmd().Name(), args, res.Code, res.Stdout, res.Stderr)
		}
		cmdtest.NoServerWarnings(t, newCmd().Name(), res.Stderr)
		return sum
	}
	at := func(d time.Duration) string { return asOf.Add(d).Format(time.RFC3339) }
	messages := func(user, kind string) []string { // "status destination destination_jid"
		t.Helper()
		var out []string
		for _, m := range fixture.MessagesOf(t, conn, user) {
			if m.Type == kind {
				out = append(out, m.Status+" "+m.Destination+" "+m.DestinationJID)
			}
		}
		return out
	}
	counter := func(sum map[string]any, name string) int {
		t.Helper()
		n, ok := sum[name].(float64)
		if !ok {
			t.Fatalf("summary %v has no counter %q", sum, name)
		}
		return int(n)
	}

	before, err := botdb.Take(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "up"); res.Code != 0 {
		t.Fatalf("migrate up on the bot's database: exit %d: %s", res.Code, res.Stderr)
	}
	changes, err := before.Changes(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		t.Errorf("migrate up changed the bot's %s", c)
	}

	// The daily job, without its queue step.
	daily := run(jobcmd.NewDailyCommand, "--as-of", at(0), "--skip-send")
	if got := counter(daily, "queued"); got != 3 {
		t.Errorf("daily queued %d goodbyes, want 3 (silent 20 days, no activity for 30 days, NULL profile fields): %v", got, daily)
	}
	for user, want := range map[string]string{
		botdb.ActiveRecent:      "active",
		botdb.Silent20Days:      "goodbye_sent",
		botdb.NoActivityOld:     "goodbye_sent",
		botdb.NoActivityNew:     "active",
		botdb.NullProfile:       "goodbye_sent",
		botdb.OldPendingGoodbye: "goodbye_sent", // its goodbye is not delivered yet
		botdb.OldSentGoodbye:    "dormant",      // delivered 4 days ago, unanswered
		botdb.ReminderDue:       "dormant",
		botdb.Dormant:           "dormant",
		botdb.OptedOut:          "active",
	} {
		if got := fixture.DeployState(t, conn, user); got != want {
			t.Errorf("after daily, user %s is %s, want %s", user, got, want)
		}
	}
	if got := messages(botdb.NullProfile, "goodbye"); len(got) != 1 || got[0] != "pending individual 5511900000005@s.whatsapp.net" {
		t.Errorf("the goodbye of the user with NULL destination and locale: %v, want one pending to the individual JID", got)
	}
	if got := messages(botdb.OldPendingGoodbye, "goodbye"); len(got) != 1 {
		t.Errorf("the old scheduler's user has %d goodbyes, want its one: %v", len(got), got)
	}

	// The weekly job: the user active this week, the one whose review
	// failed last week; the one the old scheduler reviewed this week is a
	// duplicate.
	weekly := run(jobcmd.NewWeeklyCommand, "--as-of", at(0), "--skip-send")
	if q, d := counter(weekly, "queued"), counter(weekly, "duplicates"); q != 2 || d != 1 {
		t.Errorf("weekly queued %d and found %d duplicates, want 2 and 1: %v", q, d, weekly)
	}

	// Delivery: each due message once, the old scheduler's goodbye under
	// its own key; not the goodbye of the user with no activity for 30
	// days, past the webhook's reach-out window (issue 58): cancelled.
	sent := run(queuecmd.NewCommand, "--send-interval", "0")
	if got, reasons := counter(sent, "sent"), sent["cancel_reasons"]; got != 5 || fmt.Sprint(reasons) != "map[reachout_window:1]" {
		t.Errorf("queue-process sent %d, cancelled %v; want 5 (the old goodbye, 2 new goodbyes, 2 reviews) and 1 reachout_window: %v",
			got, reasons, sent)
	}
	oldKey := botdb.OldPendingGoodbye + ":goodbye_sent:" + asOf.Add(-24*time.Hour).Format("2006-01-02")
	if reqs := bot.ByKey(oldKey); len(reqs) != 1 || reqs[0].Body.Text == "" {
		t.Errorf("the old scheduler's pending goodbye reached the bot %d times (want 1, rendered): %+v", len(reqs), reqs)
	}
	perKey := map[string]int{}
	for _, r := range bot.Requests() {
		perKey[r.IdempotencyKey]++
	}
	for k, n := range perKey {
		if n != 1 {
			t.Errorf("key %s was sent %d times", k, n)
		}
	}

	// Run everything again: nothing new but the cancelled goodbye's user,
	// back to active (a goodbye not delivered is not timed out on).
	if daily := run(jobcmd.NewDailyCommand, "--as-of", at(0)); counter(daily, "queued") != 0 || counter(daily, "processed") != 1 {
		t.Errorf("daily again: %v, want nothing queued and the one user moved", daily)
	}
	if weekly := run(jobcmd.NewWeeklyCommand, "--as-of", at(0), "--skip-send"); counter(weekly, "queued") != 0 {
		t.Errorf("weekly again: %v, want nothing queued", weekly)
	}
	if again := run(queuecmd.NewCommand, "--send-interval", "0"); counter(again, "sent") != 0 {
		t.Errorf("queue-process again: %v, want nothing sent", again)
	}
	if n := len(bot.Requests()); n != 5 {
		t.Errorf("the bot got %d requests in all, want 5", n)
	}

	verify := func(asOf string) {
		t.Helper()
		res := cmdtest.Exec(t, ctl.NewCommand, env, "verify", "--as-of", asOf, "--output", "json")
		if res.Code != 0 {
			t.Errorf("verify as of %s: exit %d\n%s\n%s", asOf, res.Code, res.Stdout, res.Stderr)
		}
	}
	verify(at(time.Minute))
	for _, args := range [][]string{{"status"}, {"status", "--output", "json"}, {"cleanup", "--dry-run"}, {"cleanup"}} {
		if res := cmdtest.Exec(t, ctl.NewCommand, env, args...); res.Code != 0 {
			t.Errorf("engagementctl %v: exit %d: %s", args, res.Code, res.Stderr)
		}
	}

	// The old goodbye's 48 hours count from its delivery (now), not from
	// the old scheduler's goodbye_expires_at (as-of + 1 day).
	run(jobcmd.NewDailyCommand, "--as-of", at(47*time.Hour), "--allow-future-as-of", "--skip-send")
	if got := fixture.DeployState(t, conn, botdb.OldPendingGoodbye); got != "goodbye_sent" {
		t.Errorf("47 h after its goodbye was delivered, the old scheduler's user is %s, want goodbye_sent", got)
	}
	run(jobcmd.NewDailyCommand, "--as-of", at(49*time.Hour), "--allow-future-as-of", "--skip-send")
	if got := fixture.DeployState(t, conn, botdb.OldPendingGoodbye); got != "dormant" {
		t.Errorf("49 h after its goodbye was delivered, the old scheduler's user is %s, want dormant", got)
	}
	verify(at(49*time.Hour + time.Minute))

	// The old scheduler's failed review (retry_count NULL) is requeued
	// and delivered once, under its key.
	res := cmdtest.Exec(t, ctl.NewCommand, env, "requeue", "--status", "failed", "--type", "weekly_review", "--output", "json")
	if res.Code != 0 || !strings.Contains(res.Stdout, `"requeued":1`) {
		t.Errorf("requeue the old failed review: exit %d, %s %s", res.Code, res.Stdout, res.Stderr)
	}
	revived := run(queuecmd.NewCommand, "--send-interval", "0")
	oldReview := fmt.Sprintf("%s:weekly_review:%d-W%02d", botdb.FailedOldReview, isoYear(asOf.Add(-8*24*time.Hour)), isoWeek(asOf.Add(-8*24*time.Hour)))
	if n := len(bot.ByKey(oldReview)); n != 1 {
		t.Errorf("the requeued old review reached the bot %d times, want 1: %v %v", n, revived, messages(botdb.FailedOldReview, "weekly_review"))
	}

	// engagementctl enqueue into the bot's queue, whose message_key is NOT
	// NULL: a known kind takes its catalog key; another type needs --key.
	res = cmdtest.Exec(t, ctl.NewCommand, env, "enqueue", "--user-id", botdb.ActiveRecent, "--type", "reminder",
		"--idempotency-key", "ops-1", "--output", "json")
	key := ""
	for _, m := range fixture.MessagesOf(t, conn, botdb.ActiveRecent) {
		if m.IdempotencyKey != nil && *m.IdempotencyKey == "ops-1" && m.Key != nil {
			key = *m.Key
		}
	}
	if res.Code != 0 || key != "engagement.reminder.come_back" {
		t.Errorf("enqueue --type reminder without --key: exit %d, message_key %q (%s); want the kind's catalog key", res.Code, key, res.Stderr)
	}
	res = cmdtest.Exec(t, ctl.NewCommand, env, "enqueue", "--user-id", botdb.ActiveRecent, "--type", "promo")
	if res.Code != 2 || len(cmdtest.Lines(res.Stderr)) != 1 || !strings.Contains(res.Stderr, "catalog key") {
		t.Errorf("enqueue --type promo without --key: exit %d, stderr %q; want exit 2 and one line asking for a catalog key", res.Code, res.Stderr)
	}

	res = cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "up")
	if want := fmt.Sprintf("schema version %d of %d\n", migrations.Latest, migrations.Latest); res.Code != 0 || res.Stdout != want {
		t.Errorf("a second migrate up: exit %d, %q, want 0 and %q (%s)", res.Code, res.Stdout, want, res.Stderr)
	}
}

func isoYear(t time.Time) int { y, _ := t.ISOWeek(); return y }
func isoWeek(t time.Time) int { _, w := t.ISOWeek(); return w }
