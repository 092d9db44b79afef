package verify_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/verify"
)

const day = 24 * time.Hour

// runDaily runs the daily job as of at.
func runDaily(t *testing.T, pool *pgxpool.Pool, at time.Time) *scheduler.Summary {
	t.Helper()
	sum, err := scheduler.RunDaily(context.Background(), pool, scheduler.Config{AsOf: at, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("RunDaily as of %s: %v", at.Format(time.RFC3339), err)
	}
	return sum
}

// stuckAt is verify's no_user_stuck as of at.
func stuckAt(t *testing.T, pool *pgxpool.Pool, at time.Time) verify.Check {
	t.Helper()
	return checkOf(t, check(t, pool, at), verify.CheckNoUserStuck)
}

// settleGoodbyes gives every goodbye still pending the outcome queue-process
// records: status and error on the message, and its send-ledger row with
// the last attempt's time. An error of delivery.ErrOutcomeUnknown is a send
// in doubt (in_doubt).
func settleGoodbyes(t *testing.T, pool *pgxpool.Pool, status, errText string, lastAttempt time.Time) {
	t.Helper()
	fixture.Settle(t, pool, "goodbye", status, errText, inDoubt(errText), lastAttempt)
}

// inDoubt says whether queue-process records a failure with error errText
// as a send in doubt.
func inDoubt(errText string) bool {
	return strings.HasPrefix(errText, delivery.ErrOutcomeUnknown.Error())
}

// nextDay is the start of the UTC day after t's.
func nextDay(t time.Time) time.Time { return t.UTC().Truncate(day).Add(day) }

// Issue 31, item 4: a goodbye failed for good, the daily job moved its user
// back to active (goodbye_undelivered), and verify reported the user
// ("active since …", 20 days silent) until the next day's run queued the
// new goodbye. A user just moved back is not stuck, whether the move came
// the day the goodbye was queued or with the next day's run; the daily job
// gives them their next goodbye once the backoff after a failed goodbye is
// over (7 days, issue 55), and verify reports them only once that run is a
// day late.
func TestNoUserStuckSparesAUserMovedBackByGoodbyeUndelivered(t *testing.T) {
	t.Parallel()
	queuedAt := time.Date(2026, 11, 9, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                string
		failedAt, movedBack time.Time
	}{
		{"moved back by a re-run the day it was queued", queuedAt.Add(3 * time.Hour), queuedAt.Add(4 * time.Hour)},
		{"moved back by the next day's run", queuedAt.Add(8 * time.Hour), queuedAt.Add(day)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			fixture.InactiveUsers(t, pool, 3, queuedAt.Add(-20*day))
			if sum := runDaily(t, pool, queuedAt); sum.Queued != 3 {
				t.Fatalf("queued %d goodbyes, want 3", sum.Queued)
			}
			settleGoodbyes(t, pool, "failed", "webhook: HTTP 400 (permanent)", tc.failedAt)
			if c := stuckAt(t, pool, tc.failedAt.Add(time.Minute)); !c.OK {
				t.Fatalf("verify right after the goodbyes failed: %+v, want ok", c)
			}
			runDaily(t, pool, tc.movedBack)
			if n := fixture.CountTransitions(t, pool, fixture.Moves{Trigger: "goodbye_undelivered"}); n != 3 {
				t.Fatalf("%d users moved back by goodbye_undelivered, want 3", n)
			}

			// Their next goodbye waits 7 days from the failed one (issue 55:
			// the backoff after a goodbye that failed for good); the first
			// run after that queues it.
			next := queuedAt.Add(sm.UndeliverableBackoff[0])
			for _, at := range []time.Time{tc.movedBack.Add(time.Minute), next.Add(-time.Minute), nextDay(next).Add(-time.Minute)} {
				if c := stuckAt(t, pool, at); !c.OK {
					t.Errorf("verify as of %s, users moved back at %s: %d stuck, e.g. %q; want none",
						at.Format(time.RFC3339), tc.movedBack.Format(time.RFC3339), c.Violations, c.Examples)
				}
			}
			// With no run on that day, they are a day past it: stuck.
			late := next.Add(day + time.Minute)
			if c := stuckAt(t, pool, late); c.Violations != 3 {
				t.Errorf("verify as of %s, no run since the move back: %d stuck (%q), want the 3 users the job would move",
					late.Format(time.RFC3339), c.Violations, c.Examples)
			}
			// The day's run queues their new goodbye.
			if sum := runDaily(t, pool, next); sum.Queued != 3 {
				t.Errorf("the run 7 days after the failed goodbyes queued %d goodbyes, want 3", sum.Queued)
			}
			if c := stuckAt(t, pool, late); !c.OK {
				t.Errorf("verify after the next day's run: %+v, want ok", c)
			}
		})
	}
}

// Issue 31, item 4: a goodbye whose outcome is unknown (it may have arrived)
// counts as delivered at its last attempt, engagement_processed_messages'
// last_attempt_at, and the daily job waits 48 h from then; verify counted
// from goodbye_sent_at and reported the user. It counts from the last
// attempt too.
func TestNoUserStuckCountsAGoodbyeInDoubtFromItsLastAttempt(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	queuedAt := time.Date(2026, 11, 2, 6, 0, 0, 0, time.UTC)
	fixture.InactiveUsers(t, pool, 2, queuedAt.Add(-20*day))
	runDaily(t, pool, queuedAt)
	// An outage held the goodbyes two days; the attempt that finally went
	// out lost its connection after the request was written.
	lastAttempt := queuedAt.Add(2*day + 4*time.Hour)
	settleGoodbyes(t, pool, "failed", delivery.ErrOutcomeUnknown.Error()+" (webhook: connection reset by peer)", lastAttempt)
	due := lastAttempt.Add(48 * time.Hour)

	for _, at := range []time.Time{queuedAt.Add(3*day + time.Hour), due.Add(-time.Minute), due.Add(day - time.Minute)} {
		if c := stuckAt(t, pool, at); !c.OK {
			t.Errorf("verify as of %s, goodbye in doubt since %s: %d stuck, e.g. %q; want none (the job waits until %s)",
				at.Format(time.RFC3339), lastAttempt.Format(time.RFC3339), c.Violations, c.Examples, due.Format(time.RFC3339))
		}
	}
	if c := stuckAt(t, pool, due.Add(day+time.Minute)); c.Violations != 2 {
		t.Errorf("verify a day past the 48 h: %d stuck (%q), want the 2 users the job would move", c.Violations, c.Examples)
	}
	// The job agrees: not a minute before, and on time.
	if sum := runDaily(t, pool, due.Add(-time.Minute)); sum.Processed != 0 {
		t.Errorf("the run a minute before the 48 h moved %d users, want none", sum.Processed)
	}
	if c := runDaily(t, pool, due); c.Succeeded != 2 {
		t.Errorf("the run at the 48 h moved %d users, want 2", c.Succeeded)
	}
	if c := stuckAt(t, pool, due.Add(day+time.Minute)); !c.OK {
		t.Errorf("verify after the run: %+v, want ok", c)
	}
}

// The deadlines are defined once (migration 29's functions), and the daily
// job and verify's no_user_stuck both use them: verify, a day (its grace)
// after any instant, reports exactly the users the daily job moves at that
// instant, whatever their state and whatever became of their goodbye.
func TestNoUserStuckReportsExactlyTheUsersTheDailyJobWouldMove(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	at := time.Date(2026, 11, 12, 6, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return at.Add(-d) }
	unknown := delivery.ErrOutcomeUnknown.Error() + " (webhook: timeout)"

	type goodbyeMsg struct {
		status, errText string
		sentAt          *time.Time // delivered at
		lastAttempt     *time.Time // in the send ledger
	}
	users := map[string]string{} // id -> what it is
	user := func(what string, o fixture.UserOptions, msg *goodbyeMsg) {
		t.Helper()
		id := fixture.User(t, pool, o)
		users[id] = what
		if msg == nil {
			return
		}
		m := fixture.Message{User: id, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select",
			JID: "5511999999999@s.whatsapp.net", ScheduledFor: *o.GoodbyeSentAt, Status: msg.status,
			Key: id + ":goodbye_sent:" + o.GoodbyeSentAt.UTC().Format(time.DateOnly), Error: msg.errText, InDoubt: inDoubt(msg.errText)}
		if msg.sentAt != nil {
			m.SentAt = *msg.sentAt
		}
		if msg.status == "cancelled" {
			m.CancelReason = "operator"
		}
		msgID := fixture.Queue(t, pool, m)
		if msg.lastAttempt != nil {
			fixture.Ledger(t, pool, fixture.LedgerRow{Message: msgID, Transport: "webhook", Status: "failed",
				FirstAttempt: *msg.lastAttempt, LastAttempt: *msg.lastAttempt})
		}
	}
	silent := func(d time.Duration) fixture.UserOptions { return fixture.UserOptions{LastActivity: ago(d)} }
	goodbyeSent := func(sent time.Time, optedOut bool) fixture.UserOptions {
		return fixture.UserOptions{State: "goodbye_sent", LastActivity: sent.Add(-20 * day), GoodbyeSentAt: &sent,
			GoodbyeExpiresAt: fixture.Ptr(sent.Add(48 * time.Hour)), OptedOut: optedOut}
	}
	movedBack := func(sent, back time.Time) fixture.UserOptions {
		return fixture.UserOptions{LastActivity: sent.Add(-20 * day), GoodbyeSentAt: &sent, GoodbyeExpiresAt: &back}
	}

	user("active, silent 13 days", silent(13*day), nil)
	user("active, silent exactly 14 days", silent(14*day), nil)
	user("active, silent 14 days and a minute", silent(14*day+time.Minute), nil)
	user("active, silent 20 days, opted out", fixture.UserOptions{LastActivity: ago(20 * day), OptedOut: true}, nil)
	user("help_flow, silent 20 days", fixture.UserOptions{State: "help_flow", LastActivity: ago(20 * day)}, nil)
	user("active, moved back by goodbye_undelivered an hour ago", movedBack(ago(3*time.Hour), ago(time.Hour)), nil)
	user("active, moved back by goodbye_undelivered yesterday", movedBack(ago(2*day), ago(day)), nil)
	user("active, goodbye queued an hour ago, moved back without a stamp", fixture.UserOptions{LastActivity: ago(20 * day), GoodbyeSentAt: fixture.Ptr(ago(time.Hour))}, nil)
	user("goodbye delivered 47 h ago", goodbyeSent(ago(50*time.Hour), false), &goodbyeMsg{status: "sent", sentAt: fixture.Ptr(ago(47 * time.Hour))})
	user("goodbye delivered 48 h ago", goodbyeSent(ago(50*time.Hour), false), &goodbyeMsg{status: "sent", sentAt: fixture.Ptr(ago(48 * time.Hour))})
	user("goodbye in doubt, last tried 47 h ago", goodbyeSent(ago(4*day), false), &goodbyeMsg{status: "failed", errText: unknown, lastAttempt: fixture.Ptr(ago(47 * time.Hour))})
	user("goodbye in doubt, last tried 49 h ago", goodbyeSent(ago(4*day), false), &goodbyeMsg{status: "failed", errText: unknown, lastAttempt: fixture.Ptr(ago(49 * time.Hour))})
	user("goodbye in doubt, never tried, queued 49 h ago", goodbyeSent(ago(49*time.Hour), false), &goodbyeMsg{status: "failed", errText: unknown})
	user("goodbye failed for good an hour ago", goodbyeSent(ago(5*time.Hour), false), &goodbyeMsg{status: "failed", errText: "webhook: HTTP 400", lastAttempt: fixture.Ptr(ago(time.Hour))})
	user("goodbye failed for good an hour from now", goodbyeSent(ago(5*time.Hour), false), &goodbyeMsg{status: "failed", errText: "webhook: HTTP 400", lastAttempt: fixture.Ptr(at.Add(time.Hour))})
	user("goodbye cancelled by an operator", goodbyeSent(ago(3*day), false), &goodbyeMsg{status: "cancelled"})
	user("goodbye pending for 3 days", goodbyeSent(ago(3*day), false), &goodbyeMsg{status: "pending"})
	user("goodbye without a message, expired", goodbyeSent(ago(49*time.Hour), false), nil)
	user("goodbye without a message, not expired", goodbyeSent(ago(47*time.Hour), false), nil)
	user("goodbye pending, opted out, expired", goodbyeSent(ago(49*time.Hour), true), &goodbyeMsg{status: "pending"})
	user("remind_later, due", fixture.UserOptions{State: "remind_later", LastActivity: ago(14 * day), RemindAt: fixture.Ptr(at)}, nil)
	user("remind_later, not due", fixture.UserOptions{State: "remind_later", LastActivity: ago(14 * day), RemindAt: fixture.Ptr(at.Add(time.Minute))}, nil)
	user("dormant", fixture.UserOptions{State: "dormant", LastActivity: ago(90 * day)}, nil)
	user("active, silent 20 days, no JID", fixture.UserOptions{LastActivity: ago(20 * day), WhatsAppJID: fixture.NoJID}, nil)

	// Verify a day after the instant, then the job at the instant.
	c := stuckAt(t, pool, at.Add(verify.StuckGrace))
	if len(c.Examples) != int(c.Violations) {
		t.Fatalf("%d stuck, %d examples: the test needs them all (at most %d)", c.Violations, len(c.Examples), verify.MaxExamples)
	}
	var reported []string
	for _, e := range c.Examples {
		id, _, _ := strings.Cut(e, " ")
		reported = append(reported, users[id])
	}
	sum := runDaily(t, pool, at)
	var moved []string
	for _, id := range fixture.Users(t, pool, fixture.Pick{RunID: sum.RunID}) {
		moved = append(moved, users[id])
	}
	slices.Sort(reported)
	slices.Sort(moved)
	if !slices.Equal(reported, moved) {
		t.Errorf("verify a day later reports\n\t%s\nthe daily job moves\n\t%s", strings.Join(reported, "\n\t"), strings.Join(moved, "\n\t"))
	}
	if len(moved) < 10 {
		t.Errorf("the job moved %d users, want the test to cover at least 10: %v", len(moved), moved)
	}
	t.Logf("%d users, %d moved and reported", len(users), len(moved))
}
