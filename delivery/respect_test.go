package delivery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
)

// queueTyped queues a due message of messageType for user under key and
// returns its id.
func queueTyped(t *testing.T, pool *pgxpool.Pool, user, messageType, key string) string {
	t.Helper()
	catalog := fixture.WeeklyReview.CatalogKey
	if messageType == fixture.Goodbye.Type() {
		catalog = "engagement.goodbye.self_select"
	}
	return fixture.Queue(t, pool, fixture.Message{User: user, Type: messageType, CatalogKey: catalog, Params: `{"count":"2"}`,
		JID: "5511999990000@s.whatsapp.net", ScheduledFor: time.Now().Add(-time.Minute), Key: key})
}

type cancelRow struct {
	Status string
	Reason *string
}

// cancelOf reads the queued message id's status and cancel reason.
func cancelOf(t *testing.T, pool *pgxpool.Pool, id string) cancelRow {
	t.Helper()
	m := fixture.MessageByID(t, pool, id)
	return cancelRow{m.Status, m.CancelReason}
}

// Issue 17, point 1: a message is re-checked against its user when it is
// claimed. Seen on the old code: a user who opted out after the daily job
// still got the goodbye; one who wrote to the bot again still got "we
// haven't heard from you"; one moved to dormant still got a weekly
// celebration. Nothing ever set 'cancelled'.
func TestMessagesNoLongerWantedAreCancelledWhenClaimed(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	rcv := newReceiver(t, 200)
	day := time.Date(2026, 11, 20, 6, 0, 0, 0, time.UTC)
	later := day.Add(72 * time.Hour)
	goodbyeUser := func(o fixture.UserOptions) (user, key string) {
		o.State, o.LastActivity = "goodbye_sent", day.Add(-15*24*time.Hour)
		if o.GoodbyeSentAt == nil {
			o.GoodbyeSentAt = &day
		}
		user = fixture.User(t, pool, o)
		return user, fixture.Goodbye.Key(user, day)
	}

	// A goodbye as the daily job queues it: its key, and its day in
	// period_start (which the stale check compares, never the key).
	queueGoodbye := func(user, key string) string {
		id := queueTyped(t, pool, user, fixture.Goodbye.Type(), key)
		start, _ := fixture.Goodbye.Period.Bounds(day)
		fixture.SetMessages(t, pool, fixture.MessageChange{ID: id, PeriodStart: start})
		return id
	}

	u, k := goodbyeUser(fixture.UserOptions{})
	wanted := queueGoodbye(u, k)
	u, k = goodbyeUser(fixture.UserOptions{OptedOut: true})
	optedOut := queueGoodbye(u, k)
	u, k = goodbyeUser(fixture.UserOptions{})
	cameBack := queueGoodbye(u, k)
	fixture.SetState(t, pool, u, fixture.StateChange{State: "active", LastActivity: time.Now()})
	u, k = goodbyeUser(fixture.UserOptions{GoodbyeSentAt: &later}) // a later goodbye replaced this one
	replaced := queueGoodbye(u, k)
	u = fixture.User(t, pool, fixture.UserOptions{State: "dormant", LastActivity: day})
	dormantReview := queueTyped(t, pool, u, fixture.WeeklyReview.Type(), u+":weekly_review:2026-W47")
	u = fixture.User(t, pool, fixture.UserOptions{LastActivity: day})
	activeReview := queueTyped(t, pool, u, fixture.WeeklyReview.Type(), u+":weekly_review:2026-W47")
	u = fixture.User(t, pool, fixture.UserOptions{LastActivity: day})
	gone := queueTyped(t, pool, u, fixture.WeeklyReview.Type(), u+":weekly_review:2026-W47")
	fixture.DeleteProfile(t, pool, u)
	u = fixture.User(t, pool, fixture.UserOptions{LastActivity: day, OptedOut: true})
	// A type that is no kind, which the operator declared utility
	// (engagementctl categories): no kind's rule, and an opt-out stops
	// marketing alone (issue 56; undeclared, it is marketing).
	fixture.DeclareType(t, pool, "receipt", "utility")
	other := queueTyped(t, pool, u, "receipt", u+":receipt:1")
	// Issue 23, point 4: a reminder is checked at send time like the rest:
	// wanted while its user is dormant, stale once they came back.
	u = fixture.User(t, pool, fixture.UserOptions{State: "dormant", LastActivity: day})
	dormantReminder := queueTyped(t, pool, u, fixture.Reminder.Type(), fixture.Reminder.Key(u, day))
	u = fixture.User(t, pool, fixture.UserOptions{LastActivity: day})
	cameBackReminder := queueTyped(t, pool, u, fixture.Reminder.Type(), fixture.Reminder.Key(u, day))

	sum := run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1})

	want := map[string]cancelRow{
		wanted: {"sent", nil}, activeReview: {"sent", nil}, other: {"sent", nil}, dormantReminder: {"sent", nil},
		cameBackReminder: {"cancelled", fixture.Ptr("stale")},
		optedOut:         {"cancelled", fixture.Ptr("opted_out")}, cameBack: {"cancelled", fixture.Ptr("stale")},
		replaced: {"cancelled", fixture.Ptr("stale")}, dormantReview: {"cancelled", fixture.Ptr("stale")},
		gone: {"cancelled", fixture.Ptr("no_user")},
	}
	for id, w := range want {
		got := cancelOf(t, pool, id)
		if got.Status != w.Status || fmt.Sprint(deref(got.Reason)) != fmt.Sprint(deref(w.Reason)) {
			t.Errorf("message %s: %s (%s), want %s (%s)", id, got.Status, deref(got.Reason), w.Status, deref(w.Reason))
		}
	}
	if len(rcv.got()) != 4 {
		t.Errorf("the receiver got %d messages, want the 4 still wanted", len(rcv.got()))
	}
	wantReasons := map[string]int{"opted_out": 1, "stale": 4, "no_user": 1}
	if sum.Cancelled != 6 || fmt.Sprint(sum.CancelReasons) != fmt.Sprint(wantReasons) || sum.Sent != 4 {
		t.Errorf("summary %+v, want 4 sent and 6 cancelled by %v", sum, wantReasons)
	}
	// A cancelled message keeps its idempotency key: queueing it again is a
	// duplicate, so a re-run of the job does not bring it back.
	key := fixture.MessageByID(t, pool, optedOut).Key()
	q, err := sender.Enqueue(ctx, pool, sender.Message{UserID: fixture.NewID(), Type: fixture.Goodbye.Type(),
		Key: fixture.Goodbye.CatalogKey, DestinationJID: "5511999990001@s.whatsapp.net", IdempotencyKey: key})
	if err != nil || !q.Duplicate {
		t.Errorf("enqueue under a cancelled message's key: %+v, %v; want a duplicate", q, err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Issue 17, point 2: a message due inside the quiet hours, in its user's
// time zone, is neither sent nor failed: it stays pending, moved to the end
// of the quiet hours, and is counted as deferred. The quiet hours are set
// around the database's present (one hour either side) so that the test
// needs no clock of its own; São Paulo (UTC−3, no daylight saving) is
// outside them and sends, a user without a zone or with an unknown one
// takes the operator's UTC and waits.
func TestQuietHoursDeferToTheirEndInTheUsersZone(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	rcv := newReceiver(t, 200)
	now, quiet, end := quietAroundNow(t, pool, time.UTC)

	zoned := map[string]*string{"America/Sao_Paulo": fixture.Ptr("America/Sao_Paulo"), "none": nil,
		"empty": fixture.Ptr(""), "unknown": fixture.Ptr("Mars/Olympus_Mons")}
	ids := map[string]string{}
	for name, tz := range zoned {
		u := fixture.User(t, pool, fixture.UserOptions{LastActivity: now})
		fixture.SetProfile(t, pool, u, fixture.ProfileChange{Timezone: tz})
		ids[name] = queueTyped(t, pool, u, fixture.WeeklyReview.Type(), u+":weekly_review:quiet")
	}
	sum := run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1,
		QuietHours: quiet, Timezone: "UTC"})

	if r := rowOf(t, pool, ids["America/Sao_Paulo"]); r.Status != "sent" {
		t.Errorf("the São Paulo user's message: %+v, want sent (02:00 there is outside the quiet hours)", r)
	}
	for _, name := range []string{"none", "empty", "unknown"} {
		m := fixture.MessageByID(t, pool, ids[name])
		status, at := m.Status, m.ScheduledFor
		if status != "pending" || !at.Equal(end) {
			t.Errorf("message of the user with timezone %s: %s at %s, want pending until %s", name, status, at.UTC(), end)
		}
	}
	if sum.Deferred != 3 || sum.Sent != 1 || sum.Failed != 0 {
		t.Errorf("summary %+v, want 1 sent and 3 deferred", sum)
	}
}

// quietAroundNow returns the database's present, quiet hours from an hour
// before it to an hour after it on the clocks of zone, and the instant
// they end (to the minute), so a test needs no clock of its own.
func quietAroundNow(t *testing.T, pool *pgxpool.Pool, zone *time.Location) (now time.Time, quiet delivery.QuietHours, end time.Time) {
	t.Helper()
	now = fixture.Now(t, pool).UTC()
	local := now.In(zone)
	clock := func(t time.Time) string { return t.Format("15:04") }
	quiet, err := delivery.ParseQuietHours(clock(local.Add(-time.Hour)) + "-" + clock(local.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	return now, quiet, now.Add(time.Hour).Truncate(time.Minute)
}

func TestParseQuietHours(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "21:00", "21-08", "24:00-08:00", "21:60-08:00", "8:00-9:00", "21:00-21:00", "a:bc-08:00",
		"+1:00-08:00", "21:00-+8:00", "-1:00-08:00", " 21:00 - 08:00x", "２１:00-08:00"} {
		if _, err := delivery.ParseQuietHours(bad); err == nil {
			t.Errorf("ParseQuietHours(%q) succeeded, want an error", bad)
		}
	}
	q, err := delivery.ParseQuietHours("21:00-08:00")
	if err != nil || q.Start != 21*time.Hour || q.End != 8*time.Hour || q.String() != "21:00-08:00" {
		t.Errorf("ParseQuietHours(21:00-08:00) = %+v (%s), %v", q, q, err)
	}
}

// Issue 23, point 5: a user's zone is read as PostgreSQL reads it. Users
// whose timezone is Kathmandu spelled in other cases, as its old link name
// or as a POSIX spec were messaged inside their quiet hours: the claim
// looked the name up exactly and fell back to the operator's zone. The
// quiet hours are set around the present in Kathmandu (UTC+05:45), the
// operator's zone is UTC (outside them): each spelling waits, and a zone
// PostgreSQL cannot read still falls back to UTC and sends.
func TestQuietHoursReadTheUsersZoneAsPostgreSQLDoes(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	rcv := newReceiver(t, 200)
	now, quiet, end := quietAroundNow(t, pool, time.FixedZone("+0545", 5*3600+45*60))

	spellings := []string{"asia/kathmandu", "ASIA/KATHMANDU", " Asia/Katmandu ", "<+0545>-05:45"}
	ids := map[string]string{}
	for _, tz := range append(spellings, "Mars/Olympus_Mons") {
		u := fixture.User(t, pool, fixture.UserOptions{LastActivity: now})
		fixture.SetProfile(t, pool, u, fixture.ProfileChange{Timezone: &tz})
		ids[tz] = queueTyped(t, pool, u, fixture.WeeklyReview.Type(), u+":weekly_review:quiet")
	}
	sum := run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1,
		QuietHours: quiet, Timezone: "UTC"})

	for _, tz := range spellings {
		m := fixture.MessageByID(t, pool, ids[tz])
		status, at := m.Status, m.ScheduledFor
		if status != "pending" || !at.Equal(end) {
			t.Errorf("message of the user with timezone %q: %s at %s, want pending until %s", tz, status, at.UTC(), end)
		}
	}
	if r := rowOf(t, pool, ids["Mars/Olympus_Mons"]); r.Status != "sent" {
		t.Errorf("the message of the user whose zone PostgreSQL cannot read: %+v, want sent by the operator's UTC", r)
	}
	if sum.Deferred != len(spellings) || sum.Sent != 1 {
		t.Errorf("summary %+v, want %d deferred and 1 sent", sum, len(spellings))
	}
}
