package scheduler_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// failGoodbyes marks every queued goodbye failed for good (the receiver
// refused it) at its last attempt, as queue-process records it: the message
// failed, its send-ledger row failed with the attempt's time.
func failGoodbyes(t *testing.T, pool *pgxpool.Pool, lastAttempt time.Time) {
	t.Helper()
	fixture.Settle(t, pool, "goodbye", "failed", "webhook: HTTP 400 (permanent)", false, lastAttempt)
}

// Issue 31, item 5: after a goodbye failed for good, each re-run of the
// daily job the same UTC day moved its users active -> goodbye_sent
// (inactivity_14d: the day's key was taken, nothing queued) and straight
// back (goodbye_undelivered): 3 re-runs, 10 users, 60 transitions, no
// goodbye. A re-run the same UTC day as the move back changes nothing, no
// transition and no message, whether the move came the day the goodbye was
// queued or with the next day's run; the next day's run queues the new
// goodbye once the backoff after a failed one is over (issue 55).
func TestARerunTheSameDayAfterAnUndeliveredGoodbyeChangesNothing(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	queuedAt := time.Date(2026, 11, 16, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                string
		failedAt, movedBack time.Time
	}{
		{"moved back the day the goodbye was queued", queuedAt.Add(3 * time.Hour), queuedAt.Add(4 * time.Hour)},
		{"moved back by the next day's run", queuedAt.Add(8 * time.Hour), queuedAt.Add(day)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rerunAfterUndelivered(t, queuedAt, tc.failedAt, tc.movedBack)
		})
	}
}

func rerunAfterUndelivered(t *testing.T, queuedAt, failedAt, movedBack time.Time) {
	pool, _ := pgtest.NewPool(t)
	day := 24 * time.Hour
	fixture.InactiveUsers(t, pool, 10, queuedAt.Add(-20*day))
	run := func(at time.Time) *scheduler.Summary {
		t.Helper()
		return runDaily(t, pool, scheduler.Config{AsOf: at, Logger: zerolog.Nop()})
	}

	if sum := run(queuedAt); sum.Queued != 10 {
		t.Fatalf("the day's run queued %d goodbyes, want 10", sum.Queued)
	}
	failGoodbyes(t, pool, failedAt)
	// A later run finds them undelivered: the users never got them, and
	// are active again.
	if c := stepOf(t, run(movedBack), "goodbye_timeout"); c.Succeeded != 10 {
		t.Fatalf("goodbye_timeout moved %d users back, want 10", c.Succeeded)
	}
	if n := fixture.CountStates(t, pool, fixture.States{State: "active"}); n != 10 {
		t.Fatalf("%d users active after goodbye_undelivered, want 10", n)
	}

	snapshot := func() string { return dbSnapshot(t, pool, true) }
	before := snapshot()
	transitions := fixture.CountTransitions(t, pool, fixture.Moves{})
	endOfDay := movedBack.Truncate(day).Add(day - time.Minute)
	for _, at := range []time.Time{movedBack.Add(time.Hour), movedBack.Add(8 * time.Hour), endOfDay} {
		sum := run(at)
		if sum.Processed != 0 || sum.Queued != 0 || sum.Duplicates != 0 || sum.Failed != 0 {
			t.Errorf("re-run as of %s: %+v, want nothing processed, queued or duplicated", at.Format(time.RFC3339), sum.Counts)
		}
		if after := snapshot(); after != before {
			n := fixture.CountTransitions(t, pool, fixture.Moves{})
			t.Fatalf("re-run as of %s changed the database: %d transitions logged, were %d; states, messages and log %.120s…, were %.120s…",
				at.Format(time.RFC3339), n, transitions, after, before)
		}
	}

	// The next day's run queues nothing: a goodbye that failed for good
	// (here without a WhatsApp code) waits 7 days from the failed one's
	// (issue 55, statemachine.UndeliverableBackoff). The first run once
	// they are over queues the new goodbye.
	if sum := run(movedBack.Truncate(day).Add(day + 6*time.Hour)); sum.Queued != 0 {
		t.Errorf("the next day's run: %+v, want nothing queued before the backoff's 7 days", sum.Counts)
	}
	next := queuedAt.Add(sm.UndeliverableBackoff[0])
	sum := run(next)
	if sum.Queued != 10 || sum.Duplicates != 0 {
		t.Errorf("the run 7 days after the failed goodbyes: %+v, want 10 new goodbyes queued", sum.Counts)
	}
	wantKeyDay := next.Format(time.DateOnly)
	n := 0
	for _, u := range fixture.Users(t, pool, fixture.Pick{State: "goodbye_sent"}) {
		n += fixture.CountMessages(t, pool, fixture.Messages{Status: "pending", Key: u + ":goodbye_sent:" + wantKeyDay, Users: []string{u}})
	}
	if n != 10 {
		t.Errorf("%d users in goodbye_sent with a pending goodbye keyed %s, want 10", n, wantKeyDay)
	}
}
