package verify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/verify"
)

// Issue 44: no_send_after_opt_out finds a message sent while its user was
// opted out, past the grace a send that had started may take, and nothing
// else: not a send before the opt-out, within the grace, after an opt-in,
// or before an opt-out recorded late.
func TestVerifyNoSendAfterOptOut(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	event := func(user string, out bool, at, recorded time.Time) {
		t.Helper()
		fixture.ConsentEvent(t, pool, user, out, "bot:keyword", at, recorded)
	}
	n := 0
	sentKind := func(kind sm.Message, user string, at time.Time) string {
		t.Helper()
		n++
		return fixture.Queue(t, pool, fixture.Message{User: user, Type: string(kind),
			CatalogKey: "engagement.weekly_review.celebration", JID: "5511900000001@s.whatsapp.net",
			ScheduledFor: at.Add(-time.Minute), Status: "sent", SentAt: at, Key: user + ":review:" + time.Duration(n).String()})
	}
	sent := func(user string, at time.Time) string { return sentKind(sm.WeeklyReviewMessage, user, at) }
	user := func() string { return fixture.User(t, pool, fixture.UserOptions{LastActivity: ago(time.Hour)}) }

	// Opted out an hour ago: before, within the grace, and (broken) after.
	a := user()
	event(a, true, ago(time.Hour), ago(time.Hour))
	sent(a, ago(70*time.Minute))
	sent(a, ago(time.Hour).Add(verify.OptOutGrace-time.Second))
	late := sent(a, ago(50*time.Minute))
	// Out, then back in: sent after the opt-in.
	b := user()
	event(b, true, ago(3*time.Hour), ago(3*time.Hour))
	event(b, false, ago(2*time.Hour), ago(2*time.Hour))
	sent(b, ago(time.Hour))
	// An opt-out said two hours ago but recorded now: what went before it
	// was recorded could not be stopped.
	c := user()
	event(c, true, ago(2*time.Hour), now)
	sent(c, ago(time.Hour))
	// The opt-out's confirmation, sent (late) while its user is opted out:
	// exempt, the one kind sent only then.
	d := user()
	event(d, true, ago(2*time.Hour), ago(2*time.Hour))
	sentKind(sm.OptOutConfirmationMessage, d, ago(time.Hour))

	// Issue 56: in, said an hour ago, then an opt-out said two hours ago
	// arriving after it: superseded, it changed nothing, and a send after
	// it is no violation.
	e := user()
	if _, err := activity.OptIn(ctx, pool, e, "bot:keyword", activity.ConsentOptions{At: ago(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := activity.OptOut(ctx, pool, e, "meta:user_preferences", activity.ConsentOptions{At: ago(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	superseded := 0
	for _, ev := range fixture.ConsentEventsOf(t, pool, e) {
		if ev.OptedOut && ev.Superseded {
			superseded++
		}
	}
	if superseded != 1 {
		t.Fatalf("%d superseded opt-outs, want 1", superseded)
	}
	fixture.ConsentRecordedAt(t, pool, e, ago(90*time.Minute))
	sent(e, ago(30*time.Minute))

	rep, err := verify.Run(ctx, pool, verify.Config{AsOf: now})
	if err != nil {
		t.Fatal(err)
	}
	got := checkOf(t, rep, verify.CheckNoSendAfterOptOut)
	if got.OK || got.Violations != 1 || len(got.Examples) != 1 || !strings.HasPrefix(got.Examples[0], late+" (user "+a) || got.Exempt != 1 {
		t.Errorf("no_send_after_opt_out: %+v; want the one message sent 10 minutes after its user's opt-out, and the confirmation exempt", got)
	}
}
