package verify_test

import (
	"context"
	_ "embed"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/seeded"
	"github.com/engagement-scheduler/engagement/verify"
)

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

// Breakages written as DDL, which no typed statement can run: the files
// say what each leaves behind.
var (
	//go:embed testdata/drop_key_index.sql
	dropKeyIndex string
	//go:embed testdata/public_data_api.sql
	publicDataAPI string
)

// movedToGoodbyeSent picks the users the daily job moved to goodbye_sent.
var movedToGoodbyeSent = fixture.Pick{State: "goodbye_sent", Trigger: "inactivity_14d"}

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
	unlogged := len(fixture.Users(t, pool, fixture.Pick{State: "goodbye_sent"})) -
		len(fixture.Users(t, pool, fixture.Pick{State: "goodbye_sent", Moved: true}))
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
			user := fixture.FirstUser(t, pool, movedToGoodbyeSent)
			fixture.DeleteMessages(t, pool, "", []string{user}, "goodbye")
			return user
		}},
		{verify.CheckOneGoodbyePerDay, func(t *testing.T, pool *pgxpool.Pool) string {
			// Without the unique index, a second goodbye under the same key.
			fixture.Exec(t, pool, dropKeyIndex)
			user := fixture.FirstUser(t, pool, movedToGoodbyeSent)
			fixture.CopyMessages(t, pool, fixture.Copy{User: user, Type: "goodbye"})
			return user + " 2026-03-02 (2 goodbyes)"
		}},
		{verify.CheckOneReviewPerWeek, func(t *testing.T, pool *pgxpool.Pool) string {
			// A key-less review later the same ISO week: the index cannot see it.
			user := fixture.FirstUser(t, pool, fixture.Pick{MessageType: "weekly_review"})
			fixture.CopyMessages(t, pool, fixture.Copy{User: user, Type: "weekly_review",
				ScheduledFor: seeded.AsOf.Add(4 * 24 * time.Hour), Key: fixture.Ptr("")})
			return user + " 2026-W10 (2 reviews)"
		}},
		{verify.CheckNoExpiredClaims, func(t *testing.T, pool *pgxpool.Pool) string {
			id := fixture.MessageIDs(t, pool, fixture.Messages{Status: "pending"}, 1)[0]
			fixture.SetMessages(t, pool, fixture.MessageChange{ID: id,
				SetStatus: "processing", ClaimedBy: "test", ClaimedUntil: seeded.AsOf.Add(-time.Minute)})
			// A claim still within its deadline is fine.
			fixture.SetMessages(t, pool, fixture.MessageChange{ID: fixture.MessageIDs(t, pool, fixture.Messages{Status: "pending"}, 1)[0],
				SetStatus: "processing", ClaimedBy: "test", ClaimedUntil: seeded.AsOf.Add(24 * time.Hour)})
			return id
		}},
		{verify.CheckTransitionsAllowed, func(t *testing.T, pool *pgxpool.Pool) string {
			// active -goodbye_timeout-> dormant is not in the table; the
			// user is dormant, so the log still agrees with the state.
			user := fixture.FirstUser(t, pool, fixture.Pick{Trigger: "goodbye_timeout"})
			id := fixture.LogMove(t, pool, fixture.Move{User: user, From: "active", To: "dormant", Trigger: "goodbye_timeout"})
			return "transition " + strconv.FormatInt(id, 10) + " of " + user + ": active -goodbye_timeout-> dormant"
		}},
		{verify.CheckLogMatchesState, func(t *testing.T, pool *pgxpool.Pool) string {
			// A log row written after the state's last change that disagrees
			// with it: a move logged but never made.
			user := fixture.FirstUser(t, pool, fixture.Pick{State: "active"})
			fixture.LogMove(t, pool, fixture.Move{User: user, From: "active", To: "goodbye_sent", Trigger: "inactivity_14d"})
			// Moved by the bot after the log row: not a disagreement.
			now := fixture.Now(t, pool)
			fixture.SetState(t, pool, fixture.FirstUser(t, pool, fixture.Pick{State: "dormant", Moved: true}),
				fixture.StateChange{State: "active", LastActivity: now, UpdatedAt: now.Add(time.Hour)})
			return user + " (state active, log says goodbye_sent)"
		}},
		{verify.CheckStateTimestamps, func(t *testing.T, pool *pgxpool.Pool) string {
			user := fixture.FirstUser(t, pool, fixture.Pick{State: "remind_later"})
			fixture.SetState(t, pool, user, fixture.StateChange{NoRemindAt: true})
			return user + " (remind_later without remind_at)"
		}},
		{verify.CheckNoUserStuck, func(t *testing.T, pool *pgxpool.Pool) string {
			// A remind_later user two days past remind_at: no daily run
			// moved them on.
			user := fixture.FirstUser(t, pool, fixture.Pick{State: "remind_later"})
			at := seeded.AsOf.Add(-48 * time.Hour)
			fixture.SetState(t, pool, user, fixture.StateChange{RemindAt: at})
			return user + " (remind_later since " + at.UTC().Format("2006-01-02T15:04Z") + ")"
		}},
		{verify.CheckInstantsPlausible, func(t *testing.T, pool *pgxpool.Pool) string {
			// Issue 42: a JavaScript timestamp in microseconds, stored as
			// the user's last activity before engagement_fire refused it.
			user := fixture.FirstUser(t, pool, fixture.Pick{State: "active"})
			fixture.SetState(t, pool, user, fixture.StateChange{LastActivity: time.Date(58874, 1, 1, 0, 0, 0, 0, time.UTC)})
			// A reminder 14 days out is where the bot's move puts it: fine.
			fixture.SetState(t, pool, fixture.FirstUser(t, pool, fixture.Pick{State: "remind_later"}),
				fixture.StateChange{RemindAt: fixture.Now(t, pool).Add(14 * 24 * time.Hour)})
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
		user := fixture.FirstUser(t, pool, movedToGoodbyeSent)
		fixture.DeleteMessages(t, pool, "", []string{user}, "goodbye")
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
	user := fixture.FirstUser(t, pool, movedToGoodbyeSent)
	// The goodbye's key rewritten beyond recognition: still queued.
	fixture.SetMessages(t, pool, fixture.MessageChange{User: user, Type: "goodbye", Key: "manual goodbye, ticket 1234"})
	if rep := check(t, pool, seeded.AsOf.Add(time.Hour)); !rep.OK {
		t.Fatalf("broken %v after rewriting a goodbye's key, want every check to hold: the columns name its day", rep.Broken)
	}
	// A second goodbye whose key looks like another day's, scheduled
	// another day, but queued (its columns say) for the same day.
	fixture.CopyMessages(t, pool, fixture.Copy{User: user, Type: "goodbye", Shift: 3 * 24 * time.Hour,
		Key: fixture.Ptr(user + ":goodbye_sent:1999-01-01"), KeepPeriod: true})
	// A review with a week-like key of another week, queued for this one.
	reviewer := fixture.FirstUser(t, pool, fixture.Pick{MessageType: "weekly_review"})
	fixture.CopyMessages(t, pool, fixture.Copy{User: reviewer, Type: "weekly_review", Shift: -30 * 24 * time.Hour,
		Key: fixture.Ptr(reviewer + ":weekly_review:2020-W01"), KeepPeriod: true})
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
