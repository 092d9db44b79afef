package verify_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/seeded"
	"github.com/engagement-scheduler/engagement/verify"
)

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryID(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) string {
	t.Helper()
	var id string
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return id
}

func check(t *testing.T, pool *pgxpool.Pool, asOf time.Time) *verify.Report {
	t.Helper()
	rep, err := verify.Run(context.Background(), pool, verify.Config{AsOf: asOf})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

func checkOf(t *testing.T, rep *verify.Report, name string) verify.Check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the report has no check %q", name)
	return verify.Check{}
}

// movedToGoodbyeSent is a user the daily job moved to goodbye_sent.
const movedToGoodbyeSent = `
	SELECT s.user_id::text FROM user_engagement_states s
	  JOIN engagement_state_transitions l ON l.user_id = s.user_id AND l.trigger = 'inactivity_14d'
	 WHERE s.state = 'goodbye_sent' ORDER BY s.user_id LIMIT 1`

func TestVerifyHoldsOnSeededData(t *testing.T) {
	t.Parallel()
	pool, _, _ := seeded.Pool(t)
	rep := check(t, pool, seeded.AsOf.Add(time.Hour))
	if !rep.OK || len(rep.Broken) != 0 {
		t.Fatalf("verify on a database only the jobs wrote to: broken %v, report %+v", rep.Broken, rep.Checks)
	}
	var names []string
	for _, c := range rep.Checks {
		names = append(names, c.Name)
		if !c.OK || c.Violations != 0 || len(c.Examples) != 0 || c.Rule == "" {
			t.Errorf("check %s: %+v, want ok with a rule and no examples", c.Name, c)
		}
	}
	want := []string{verify.CheckGoodbyeQueued, verify.CheckOneGoodbyePerDay, verify.CheckOneReviewPerWeek,
		verify.CheckNoExpiredClaims, verify.CheckTransitionsAllowed, verify.CheckLogMatchesState, verify.CheckStateTimestamps,
		verify.CheckNoUserStuck, verify.CheckInstantsPlausible, verify.CheckNoSendAfterOptOut, verify.CheckNoGoodbyeToHoldout, verify.CheckTimeZonesUsable, verify.CheckDataAPIClosed}
	if !slices.Equal(names, want) {
		t.Errorf("checks %v, want %v", names, want)
	}
	// The seed puts users in goodbye_sent without a goodbye or a log row
	// (the bot did it): the rule excuses exactly those.
	unlogged := fixture.Count(t, pool, `
		SELECT count(*) FROM user_engagement_states s
		 WHERE s.state = 'goodbye_sent'
		   AND NOT EXISTS (SELECT 1 FROM engagement_state_transitions l WHERE l.user_id = s.user_id)`)
	if got := checkOf(t, rep, verify.CheckGoodbyeQueued).Exempt; unlogged == 0 || got != int64(unlogged) {
		t.Errorf("goodbye_queued exempt %d, want the %d goodbye_sent users with no log row (and more than 0)", got, unlogged)
	}
}

// Each deliberate breakage makes verify report exactly its check, with the
// offending id among the examples.
func TestVerifyReportsEachBrokenInvariant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		check string
		// breakIt breaks the database and returns the text the check's
		// example must contain.
		breakIt func(t *testing.T, pool *pgxpool.Pool) string
	}{
		{verify.CheckGoodbyeQueued, func(t *testing.T, pool *pgxpool.Pool) string {
			user := queryID(t, pool, movedToGoodbyeSent)
			exec(t, pool, `DELETE FROM engagement_message_queue WHERE user_id = $1 AND message_type = 'goodbye'`, user)
			return user
		}},
		{verify.CheckOneGoodbyePerDay, func(t *testing.T, pool *pgxpool.Pool) string {
			// Without the unique index, a second goodbye under the same key.
			exec(t, pool, `DROP INDEX engagement_message_queue_idempotency_key_idx`)
			user := queryID(t, pool, movedToGoodbyeSent)
			exec(t, pool, `
				INSERT INTO engagement_message_queue (user_id, message_type, message_key, destination, destination_jid, scheduled_for, idempotency_key)
				SELECT user_id, message_type, message_key, destination, destination_jid, scheduled_for, idempotency_key
				  FROM engagement_message_queue WHERE user_id = $1 AND message_type = 'goodbye'`, user)
			return user + " 2026-03-02 (2 goodbyes)"
		}},
		{verify.CheckOneReviewPerWeek, func(t *testing.T, pool *pgxpool.Pool) string {
			// A key-less review later the same ISO week: the index cannot see it.
			user := queryID(t, pool, `SELECT user_id::text FROM engagement_message_queue WHERE message_type = 'weekly_review' ORDER BY user_id LIMIT 1`)
			exec(t, pool, `
				INSERT INTO engagement_message_queue (user_id, message_type, message_key, destination, destination_jid, scheduled_for)
				SELECT user_id, message_type, message_key, destination, destination_jid, $2
				  FROM engagement_message_queue WHERE user_id = $1 AND message_type = 'weekly_review'`, user, seeded.AsOf.Add(4*24*time.Hour))
			return user + " 2026-W10 (2 reviews)"
		}},
		{verify.CheckNoExpiredClaims, func(t *testing.T, pool *pgxpool.Pool) string {
			id := queryID(t, pool, `SELECT id::text FROM engagement_message_queue WHERE status = 'pending' ORDER BY id LIMIT 1`)
			exec(t, pool, `UPDATE engagement_message_queue SET status = 'processing', claimed_by = 'test', claimed_until = $2 WHERE id = $1`,
				id, seeded.AsOf.Add(-time.Minute))
			// A claim still within its deadline is fine.
			exec(t, pool, `UPDATE engagement_message_queue SET status = 'processing', claimed_by = 'test', claimed_until = $1
				WHERE id = (SELECT id FROM engagement_message_queue WHERE status = 'pending' ORDER BY id LIMIT 1)`,
				seeded.AsOf.Add(24*time.Hour))
			return id
		}},
		{verify.CheckTransitionsAllowed, func(t *testing.T, pool *pgxpool.Pool) string {
			// active -goodbye_timeout-> dormant is not in the table; the
			// user is dormant, so the log still agrees with the state.
			user := queryID(t, pool, `SELECT user_id::text FROM engagement_state_transitions WHERE trigger = 'goodbye_timeout' ORDER BY user_id LIMIT 1`)
			id := queryID(t, pool, `INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger)
				VALUES ($1, 'active', 'dormant', 'goodbye_timeout') RETURNING id::text`, user)
			return "transition " + id + " of " + user + ": active -goodbye_timeout-> dormant"
		}},
		{verify.CheckLogMatchesState, func(t *testing.T, pool *pgxpool.Pool) string {
			// A log row written after the state's last change that disagrees
			// with it: a move logged but never made.
			user := queryID(t, pool, `SELECT user_id::text FROM user_engagement_states WHERE state = 'active' ORDER BY user_id LIMIT 1`)
			exec(t, pool, `INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger) VALUES ($1, 'active', 'goodbye_sent', 'inactivity_14d')`, user)
			// Moved by the bot after the log row: not a disagreement.
			exec(t, pool, `UPDATE user_engagement_states SET state = 'active', last_activity_at = now(), updated_at = now() + interval '1 hour'
				WHERE user_id = (SELECT l.user_id FROM engagement_state_transitions l JOIN user_engagement_states s USING (user_id)
				                  WHERE s.state = 'dormant' ORDER BY l.user_id LIMIT 1)`)
			return user + " (state active, log says goodbye_sent)"
		}},
		{verify.CheckStateTimestamps, func(t *testing.T, pool *pgxpool.Pool) string {
			user := queryID(t, pool, `SELECT user_id::text FROM user_engagement_states WHERE state = 'remind_later' ORDER BY user_id LIMIT 1`)
			exec(t, pool, `UPDATE user_engagement_states SET remind_at = NULL WHERE user_id = $1`, user)
			return user + " (remind_later without remind_at)"
		}},
		{verify.CheckNoUserStuck, func(t *testing.T, pool *pgxpool.Pool) string {
			// A remind_later user two days past remind_at: no daily run
			// moved them on.
			user := queryID(t, pool, `SELECT user_id::text FROM user_engagement_states WHERE state = 'remind_later' ORDER BY user_id LIMIT 1`)
			at := seeded.AsOf.Add(-48 * time.Hour)
			exec(t, pool, `UPDATE user_engagement_states SET remind_at = $2 WHERE user_id = $1`, user, at)
			return user + " (remind_later since " + at.UTC().Format("2006-01-02T15:04Z") + ")"
		}},
		{verify.CheckInstantsPlausible, func(t *testing.T, pool *pgxpool.Pool) string {
			// Issue 42: a JavaScript timestamp in microseconds, stored as
			// the user's last activity before engagement_fire refused it.
			user := queryID(t, pool, `SELECT user_id::text FROM user_engagement_states WHERE state = 'active' ORDER BY user_id LIMIT 1`)
			exec(t, pool, `UPDATE user_engagement_states SET last_activity_at = '58874-01-01 00:00:00+00' WHERE user_id = $1`, user)
			// A reminder 14 days out is where the bot's move puts it: fine.
			exec(t, pool, `UPDATE user_engagement_states SET remind_at = now() + interval '14 days'
				WHERE user_id = (SELECT user_id FROM user_engagement_states WHERE state = 'remind_later' ORDER BY user_id LIMIT 1)`)
			return user + " (last_activity_at out of range)"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.check, func(t *testing.T) {
			t.Parallel()
			pool, _, _ := seeded.Pool(t)
			want := tt.breakIt(t, pool)
			rep := check(t, pool, seeded.AsOf.Add(time.Hour))
			if rep.OK || !slices.Equal(rep.Broken, []string{tt.check}) {
				t.Fatalf("broken %v (ok %v), want exactly [%s]", rep.Broken, rep.OK, tt.check)
			}
			c := checkOf(t, rep, tt.check)
			if c.OK || c.Violations != 1 || len(c.Examples) != 1 || !strings.Contains(c.Examples[0], want) {
				t.Fatalf("check %s: ok %v, %d violations, examples %q; want 1 violation, example containing %q",
					tt.check, c.OK, c.Violations, c.Examples, want)
			}
		})
	}

	// A missing goodbye whose day is past cleanup's retention may have
	// been deleted: it is exempt, not a violation.
	t.Run("goodbye past the retention", func(t *testing.T) {
		t.Parallel()
		pool, _, _ := seeded.Pool(t)
		user := queryID(t, pool, movedToGoodbyeSent)
		exec(t, pool, `DELETE FROM engagement_message_queue WHERE user_id = $1 AND message_type = 'goodbye'`, user)
		before := checkOf(t, check(t, pool, seeded.AsOf.Add(time.Hour)), verify.CheckGoodbyeQueued)
		late := seeded.AsOf.Add(31 * 24 * time.Hour)
		rep, err := verify.Run(ctx, pool, verify.Config{AsOf: late, Retention: 720 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		after := checkOf(t, rep, verify.CheckGoodbyeQueued)
		if before.OK || !after.OK || after.Exempt != before.Exempt+1 {
			t.Fatalf("within the retention: %+v; past it: %+v; want a violation that becomes one more exemption", before, after)
		}
	})
}

// Issue 18, item 2: verify reads the period a message was queued for from
// its period_start, never from its key. A goodbye whose key has no known
// shape but whose columns name the day counts as that day's goodbye; a
// second one for that day, keyed no matter how, breaks one_goodbye_per_day;
// reviews likewise for their ISO week.
func TestVerifyReadsPeriodsFromColumnsNotKeys(t *testing.T) {
	t.Parallel()
	pool, _, _ := seeded.Pool(t)
	user := queryID(t, pool, movedToGoodbyeSent)
	// The goodbye's key rewritten beyond recognition: still queued.
	exec(t, pool, `UPDATE engagement_message_queue SET idempotency_key = 'manual goodbye, ticket 1234'
		WHERE user_id = $1 AND message_type = 'goodbye'`, user)
	if rep := check(t, pool, seeded.AsOf.Add(time.Hour)); !rep.OK {
		t.Fatalf("broken %v after rewriting a goodbye's key, want every check to hold: the columns name its day", rep.Broken)
	}
	// A second goodbye whose key looks like another day's, scheduled
	// another day, but queued (its columns say) for the same day.
	exec(t, pool, `
		INSERT INTO engagement_message_queue (user_id, message_type, destination, destination_jid, scheduled_for,
		                                      idempotency_key, period_start, replay_until)
		SELECT user_id, message_type, destination, destination_jid, scheduled_for + interval '3 days',
		       user_id::text || ':goodbye_sent:1999-01-01', period_start, replay_until
		  FROM engagement_message_queue WHERE user_id = $1 AND message_type = 'goodbye'`, user)
	// A review with a week-like key of another week, queued for this one.
	reviewer := queryID(t, pool, `SELECT user_id::text FROM engagement_message_queue WHERE message_type = 'weekly_review' ORDER BY user_id LIMIT 1`)
	exec(t, pool, `
		INSERT INTO engagement_message_queue (user_id, message_type, destination, destination_jid, scheduled_for,
		                                      idempotency_key, period_start, replay_until)
		SELECT user_id, message_type, destination, destination_jid, scheduled_for - interval '30 days',
		       user_id::text || ':weekly_review:2020-W01', period_start, replay_until
		  FROM engagement_message_queue WHERE user_id = $1 AND message_type = 'weekly_review'`, reviewer)
	rep := check(t, pool, seeded.AsOf.Add(time.Hour))
	if want := []string{verify.CheckOneGoodbyePerDay, verify.CheckOneReviewPerWeek}; !slices.Equal(rep.Broken, want) {
		t.Fatalf("broken %v, want %v", rep.Broken, want)
	}
	for check, want := range map[string]string{
		verify.CheckOneGoodbyePerDay: user + " 2026-03-02 (2 goodbyes)",
		verify.CheckOneReviewPerWeek: reviewer + " 2026-W10 (2 reviews)",
	} {
		if c := checkOf(t, rep, check); c.Violations != 1 || len(c.Examples) != 1 || c.Examples[0] != want {
			t.Errorf("check %s: %d violations, examples %q; want exactly %q", check, c.Violations, c.Examples, want)
		}
	}
}
