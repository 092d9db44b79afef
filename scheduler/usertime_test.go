package scheduler_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/status"
	"github.com/engagement-scheduler/engagement/verify"
)

// deliver runs queue-process's engine once over the due queue (the log
// transport), as the shipped schedule would between two daily runs. Its
// clock is the database's: sent_at is now.
func deliver(t *testing.T, pool *pgxpool.Pool) delivery.ProcessSummary {
	t.Helper()
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: transport.NewLog(io.Discard), SendInterval: -1, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := p.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// Issue 23: re-running a missed day 9 days late queued 4 goodbyes, the next
// normal run timed those users out (48 h after the old as-of), and
// queue-process cancelled the goodbyes as stale: the users went dormant
// never having seen one. The 48 hours now count from delivery.
func TestALateRerunGivesEveryUser48HoursFromDelivery(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	now := fixture.Now(t, pool)
	day := 24 * time.Hour
	missed := now.Add(-9 * day)
	users := make([]string, 4)
	for i := range users {
		users[i] = fixture.User(t, pool, fixture.UserOptions{LastActivity: missed.Add(-20 * day)})
	}

	// The missed day, re-run late: goodbyes queued, not yet delivered.
	if sum := runDaily(t, pool, scheduler.Config{AsOf: missed, Logger: zerolog.Nop()}); sum.Queued != 4 {
		t.Fatalf("the late re-run queued %d goodbyes, want 4", sum.Queued)
	}
	// The next normal run, before queue-process ran: nobody is timed out
	// on a goodbye they have not got.
	runDaily(t, pool, scheduler.Config{AsOf: now, Logger: zerolog.Nop()})
	for _, u := range users {
		if got := fixture.StateOf(t, pool, u).State; got != "goodbye_sent" {
			t.Fatalf("user %s is %s after the next run; want goodbye_sent until the goodbye is delivered", u, got)
		}
	}
	// queue-process delivers them: none is stale.
	if sum := deliver(t, pool); sum.Sent != 4 || sum.Cancelled != 0 {
		t.Fatalf("delivery: %+v; want the 4 goodbyes sent, none cancelled", sum)
	}
	sentAt := fixture.Now(t, pool)
	// 47 hours after delivery: still time to answer.
	runDaily(t, pool, scheduler.Config{AsOf: sentAt.Add(47 * time.Hour), Logger: zerolog.Nop()})
	for _, u := range users {
		if got := fixture.StateOf(t, pool, u).State; got != "goodbye_sent" {
			t.Fatalf("user %s is %s 47 h after delivery; want goodbye_sent", u, got)
		}
	}
	// 48 hours after delivery: dormant.
	runDaily(t, pool, scheduler.Config{AsOf: sentAt.Add(48*time.Hour + time.Minute), Logger: zerolog.Nop()})
	for _, u := range users {
		if got := fixture.StateOf(t, pool, u).State; got != "dormant" {
			t.Errorf("user %s is %s 48 h after delivery; want dormant", u, got)
		}
	}
}

// A goodbye the user never got does not time them out: failed for good or
// cancelled, the user is active again (goodbye_undelivered) and a later run
// queues a goodbye that is their first. One whose outcome is unknown (it
// may have arrived) counts as delivered at its last attempt.
func TestAnUndeliveredGoodbyeNeverTimesAUserOut(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	now := fixture.Now(t, pool)
	day := 24 * time.Hour
	queuedAt := now.Add(-5 * day)
	failed := fixture.User(t, pool, fixture.UserOptions{LastActivity: queuedAt.Add(-20 * day)})
	cancelled := fixture.User(t, pool, fixture.UserOptions{LastActivity: queuedAt.Add(-20 * day)})
	unknown := fixture.User(t, pool, fixture.UserOptions{LastActivity: queuedAt.Add(-20 * day)})
	pending := fixture.User(t, pool, fixture.UserOptions{LastActivity: queuedAt.Add(-20 * day)})
	runDaily(t, pool, scheduler.Config{AsOf: queuedAt, Logger: zerolog.Nop()})

	settle := func(user, status, reason, errText string) {
		t.Helper()
		fixture.SetMessages(t, pool, fixture.MessageChange{User: user, SetStatus: status, CancelReason: &reason,
			Error: &errText, InDoubt: fixture.Ptr(errText == delivery.ErrOutcomeUnknown.Error())})
	}
	settle(failed, "failed", "", "webhook: HTTP 400 (permanent)")
	settle(cancelled, "cancelled", "operator", "")
	settle(unknown, "failed", "", delivery.ErrOutcomeUnknown.Error())

	sum := runDaily(t, pool, scheduler.Config{AsOf: now, Logger: zerolog.Nop()})
	for _, tc := range []struct {
		user, state string
		log         []fixture.Transition
	}{
		{failed, "active", logged("goodbye_sent", "active", "goodbye_undelivered")},
		{cancelled, "active", logged("goodbye_sent", "active", "goodbye_undelivered")},
		{unknown, "dormant", logged("goodbye_sent", "dormant", "goodbye_timeout")},
		{pending, "goodbye_sent", nil},
	} {
		if got := fixture.StateOf(t, pool, tc.user).State; got != tc.state {
			t.Errorf("user %s: %s, want %s", tc.user, got, tc.state)
		}
		log := fixture.TransitionsOf(t, pool, tc.user)
		if len(log) < 1 || (tc.log == nil) != (len(log) == 1) || (tc.log != nil && log[len(log)-1] != tc.log[0]) {
			t.Errorf("user %s's log %v, want the goodbye then %v", tc.user, log, tc.log)
		}
	}
	if c := stepOf(t, sum, "goodbye_timeout"); c.Succeeded != 3 {
		t.Errorf("goodbye_timeout moved %d, want 3", c.Succeeded)
	}
	// The next day, the user whose goodbye was cancelled gets one: their
	// first. The one whose goodbye failed for good waits 7 days from it
	// (issue 55: statemachine.UndeliverableBackoff), then gets theirs.
	newGoodbye := func(u, when string) {
		t.Helper()
		if got := fixture.StateOf(t, pool, u).State; got != "goodbye_sent" {
			t.Errorf("user %s %s: %s, want goodbye_sent with a new goodbye", u, when, got)
		}
		if msgs := fixture.MessagesOf(t, pool, u); len(msgs) != 2 || msgs[1].Status != "pending" {
			t.Errorf("user %s's goodbyes %s: %+v, want the undelivered one and a new pending one", u, when, msgs)
		}
	}
	runDaily(t, pool, scheduler.Config{AsOf: now.Add(day), Logger: zerolog.Nop()})
	newGoodbye(cancelled, "the next day")
	if got := fixture.StateOf(t, pool, failed).State; got != "active" || len(fixture.MessagesOf(t, pool, failed)) != 1 {
		t.Errorf("user %s the next day: %s, want active with no new goodbye before 7 days", failed, got)
	}
	runDaily(t, pool, scheduler.Config{AsOf: queuedAt.Add(sm.UndeliverableBackoff[0]), Logger: zerolog.Nop()})
	newGoodbye(failed, "7 days after the failed one")
}

// Issue 23: "Remind me later" promised a reminder the product never sent.
// Off by default (AC-5.1.3: dormant, silently); with SendReminder the user
// gets one reminder, keyed {userId}:reminder:{remind_at ms}, rendered from
// the catalog at send time, as they go dormant. An opted-out user gets none.
func TestTheReminderIsAChoice(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	now := fixture.Now(t, pool)
	remindAt := now.Add(-time.Hour).Truncate(time.Millisecond)
	user := func(optedOut bool) string {
		return fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: now.Add(-20 * 24 * time.Hour),
			RemindAt: &remindAt, OptedOut: optedOut})
	}
	silent, reminded, optedOut := user(false), user(false), user(true)

	// Default: dormant, nothing queued.
	fixture.SetState(t, pool, "", fixture.StateChange{RemindAt: now.Add(time.Hour), AllBut: silent})
	runDaily(t, pool, scheduler.Config{AsOf: now, Logger: zerolog.Nop()})
	if got, msgs := fixture.StateOf(t, pool, silent).State, fixture.MessagesOf(t, pool, silent); got != "dormant" || len(msgs) != 0 {
		t.Errorf("by default: %s with %d messages, want dormant with none", got, len(msgs))
	}

	// With the option.
	fixture.SetState(t, pool, "", fixture.StateChange{RemindAt: remindAt, AllBut: silent})
	sum := runDaily(t, pool, scheduler.Config{AsOf: now, SendReminder: true, Logger: zerolog.Nop()})
	msgs := fixture.MessagesOf(t, pool, reminded)
	wantKey := reminded + ":reminder:" + strconv.FormatInt(remindAt.UnixMilli(), 10)
	if len(msgs) != 1 || msgs[0].Type != fixture.Reminder.Type() || msgs[0].IdempotencyKey == nil || *msgs[0].IdempotencyKey != wantKey {
		t.Fatalf("reminded user's messages %+v, want one reminder keyed %s", msgs, wantKey)
	}
	if *msgs[0].IdempotencyKey != fixture.Reminder.Key(reminded, remindAt) {
		t.Errorf("key %s is not the reminder kind's", *msgs[0].IdempotencyKey)
	}
	if got := fixture.StateOf(t, pool, reminded).State; got != "dormant" {
		t.Errorf("reminded user: %s, want dormant", got)
	}
	if got, msgs := fixture.StateOf(t, pool, optedOut).State, fixture.MessagesOf(t, pool, optedOut); got != "dormant" || len(msgs) != 0 {
		t.Errorf("opted-out user: %s with %d messages, want dormant, never messaged", got, len(msgs))
	}
	if c := stepOf(t, sum, "reminder_due"); c.Queued != 1 {
		t.Errorf("reminder_due queued %d, want 1", c.Queued)
	}
	// It renders and goes out.
	if d := deliver(t, pool); d.Sent != 1 || d.Failed != 0 {
		t.Errorf("delivery: %+v, want the reminder sent", d)
	}
}

// Issue 23, point 5: a zone PostgreSQL cannot read is counted and visible,
// never replaced silently. Zones it can read in another spelling (case, a
// link, a POSIX spec) are not counted.
func TestUnusableTimeZonesAreCountedAndNamed(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	now := time.Now()
	zones := []string{"America/Sao_Paulo", "america/sao_paulo", "Brazil/East", "<-03>+03", "", "Mars/Olympus_Mons", "Mars/Olympus_Mons", "São Paulo"}
	for _, tz := range zones {
		u := fixture.User(t, pool, fixture.UserOptions{LastActivity: now})
		fixture.SetProfile(t, pool, u, fixture.ProfileChange{Timezone: &tz})
	}
	st, err := status.Read(ctx, pool, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Users.UnusableTimeZones != 3 {
		t.Errorf("status counts %d users with an unusable zone, want 3 (two on Mars, one 'São Paulo')", st.Users.UnusableTimeZones)
	}
	rep, err := verify.Run(ctx, pool, verify.Config{AsOf: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		if c.Name != verify.CheckTimeZonesUsable {
			continue
		}
		if c.OK || c.Violations != 3 || len(c.Examples) != 3 || !strings.Contains(c.Examples[0], "timezone '") {
			t.Errorf("check %+v, want 3 violations naming each user's zone", c)
		}
		return
	}
	t.Errorf("verify has no %s check: %+v", verify.CheckTimeZonesUsable, rep.Checks)
}
