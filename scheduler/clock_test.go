package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/verify"
)

// TestDailyAtMidnightUTCThresholdsAreExactAndTheDayKeyFlips runs the daily
// job at 23:59:59 UTC and again one second later, at 00:00:00 UTC the next
// day, with users placed on each threshold and one microsecond (PostgreSQL's
// resolution) to either side of it. At the first run every user exactly on a
// threshold is moved or not as the contract says (last_activity_at <
// as-of − 14 d; goodbye_expires_at ≤ as-of; goodbye_sent_at ≤ as-of − 48 h
// without a deadline; remind_at ≤ as-of); the second run takes the users one
// microsecond short of it, and the goodbye it queues is keyed with the new
// day.
func TestDailyAtMidnightUTCThresholdsAreExactAndTheDayKeyFlips(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	evening := time.Date(2026, 11, 22, 23, 59, 59, 0, time.UTC)
	midnight := evening.Add(time.Second)
	const µs = time.Microsecond
	day := 24 * time.Hour
	at := func(v time.Time) *time.Time { return &v }

	inactiveJustOver := fixture.User(t, pool, fixture.UserOptions{LastActivity: evening.Add(-14*day - µs)})
	inactiveExactly := fixture.User(t, pool, fixture.UserOptions{LastActivity: evening.Add(-14 * day)})
	goodbye := func(sent time.Time, expires *time.Time) string {
		return fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: evening.Add(-30 * day),
			GoodbyeSentAt: &sent, GoodbyeExpiresAt: expires})
	}
	expiresNow := goodbye(evening.Add(-48*time.Hour), at(evening))
	expiresJustAfter := goodbye(evening.Add(-48*time.Hour+µs), at(evening.Add(µs)))
	noDeadline48h := goodbye(evening.Add(-48*time.Hour), nil)
	noDeadlineJustShort := goodbye(evening.Add(-48*time.Hour+µs), nil)
	reminder := func(remind time.Time) string {
		return fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: remind.Add(-14 * day), RemindAt: &remind})
	}
	remindNow := reminder(evening)
	remindJustAfter := reminder(evening.Add(µs))

	states := func(want map[string]string, when string) {
		t.Helper()
		names := map[string]string{
			inactiveJustOver: "inactive 14 d + 1 µs", inactiveExactly: "inactive exactly 14 d",
			expiresNow: "goodbye expiring at as-of", expiresJustAfter: "goodbye expiring 1 µs after as-of",
			noDeadline48h: "goodbye sent 48 h before, no deadline", noDeadlineJustShort: "goodbye sent 48 h − 1 µs before, no deadline",
			remindNow: "reminder at as-of", remindJustAfter: "reminder 1 µs after as-of",
		}
		for id, state := range want {
			if got := fixture.StateOf(t, pool, id).State; got != state {
				t.Errorf("%s: %s is %s, want %s", when, names[id], got, state)
			}
		}
	}
	goodbyeKeys := func(id string) []string {
		var keys []string
		for _, m := range fixture.MessagesOf(t, pool, id) {
			if m.IdempotencyKey != nil {
				keys = append(keys, *m.IdempotencyKey)
			}
		}
		return keys
	}

	first := runDaily(t, pool, scheduler.Config{AsOf: evening, Logger: zerolog.Nop()})
	states(map[string]string{
		inactiveJustOver: "goodbye_sent", inactiveExactly: "active",
		expiresNow: "dormant", expiresJustAfter: "goodbye_sent",
		noDeadline48h: "dormant", noDeadlineJustShort: "goodbye_sent",
		remindNow: "dormant", remindJustAfter: "remind_later",
	}, "at 23:59:59")
	if got := goodbyeKeys(inactiveJustOver); len(got) != 1 || got[0] != inactiveJustOver+":goodbye_sent:2026-11-22" {
		t.Errorf("at 23:59:59 the goodbye keys are %q, want one for 2026-11-22", got)
	}
	if st := fixture.StateOf(t, pool, inactiveJustOver); !st.GoodbyeSentAt.Equal(evening) || !st.GoodbyeExpiresAt.Equal(evening.Add(48*time.Hour)) {
		t.Errorf("goodbye_sent_at %v, goodbye_expires_at %v; want the as-of instant and 48 h after it", st.GoodbyeSentAt, st.GoodbyeExpiresAt)
	}
	if first.Processed != 4 || first.Queued != 1 {
		t.Errorf("at 23:59:59 processed %d queued %d, want 4 and 1", first.Processed, first.Queued)
	}

	second := runDaily(t, pool, scheduler.Config{AsOf: midnight, Logger: zerolog.Nop()})
	states(map[string]string{
		inactiveJustOver: "goodbye_sent", inactiveExactly: "goodbye_sent",
		expiresJustAfter: "dormant", noDeadlineJustShort: "dormant", remindJustAfter: "dormant",
	}, "at 00:00:00")
	if got := goodbyeKeys(inactiveExactly); len(got) != 1 || got[0] != inactiveExactly+":goodbye_sent:2026-11-23" {
		t.Errorf("at 00:00:00 the goodbye keys are %q, want one for 2026-11-23: the key's date is the as-of instant's UTC date", got)
	}
	if got := goodbyeKeys(inactiveJustOver); len(got) != 1 {
		t.Errorf("the user moved at 23:59:59 has goodbyes %q after the midnight run, want still one", got)
	}
	if second.Processed != 4 || second.Queued != 1 {
		t.Errorf("at 00:00:00 processed %d queued %d, want 4 and 1", second.Processed, second.Queued)
	}
	rep, err := verify.Run(context.Background(), pool, verify.Config{AsOf: midnight})
	if err != nil || !rep.OK {
		t.Errorf("verify after both runs: %+v, %v; want every invariant to hold", rep, err)
	}
}

// TestWeeklyWeek53SpansTheNewYear runs the weekly job across the calendar
// year's end, which ISO week 2026-W53 (Monday 2026-12-28 to Sunday
// 2027-01-03) straddles: the runs on 2026-12-31 at 23:59:59, on 2027-01-01
// at 00:00:00 and on Sunday 2027-01-03 at 23:59:59 UTC are one week, so the
// user gets one review; one second later, Monday 2027-01-04 00:00:00 UTC is
// 2027-W01 and a new review is queued.
func TestWeeklyWeek53SpansTheNewYear(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	active := time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC)
	u := fixture.User(t, pool, fixture.UserOptions{LastActivity: active})
	fixture.Transactions(t, pool, u, active)

	for _, run := range []struct {
		asOf          time.Time
		week          string
		queued, dupes int
	}{
		{time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), "2026-W53", 1, 0},
		{time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "2026-W53", 0, 1},
		{time.Date(2027, 1, 3, 23, 59, 59, 0, time.UTC), "2026-W53", 0, 1},
		{time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC), "2027-W01", 1, 0},
	} {
		sum := runWeekly(t, pool, run.asOf)
		if sum.ISOWeek != run.week || sum.Queued != run.queued || sum.Duplicates != run.dupes {
			t.Errorf("as of %s: iso_week %s queued %d duplicates %d; want %s, %d, %d",
				run.asOf.Format(time.RFC3339), sum.ISOWeek, sum.Queued, sum.Duplicates, run.week, run.queued, run.dupes)
		}
	}
	want := map[string]string{u + ":weekly_review:2026-W53": "1", u + ":weekly_review:2027-W01": "1"}
	if got := reviews(t, pool, u); len(got) != len(want) || got[u+":weekly_review:2026-W53"] != "1" || got[u+":weekly_review:2027-W01"] != "1" {
		t.Errorf("reviews %v, want %v", got, want)
	}
}
