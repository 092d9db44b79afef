package consoledata_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/consoledata"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/verify"
)

// asOf is a Wednesday afternoon, after the day's daily run and the
// messages it queued have gone out (quiet hours end 12:00 UTC).
var asOf = time.Date(2026, 3, 4, 15, 30, 0, 0, time.UTC)

// small is the size the test checks everything at: large enough for every
// category and outcome to occur, small enough for seconds.
var small = consoledata.Sizes{Users: 5_000, Messages: 25_000, Transitions: 10_000}

func seed(t *testing.T, sz consoledata.Sizes, at time.Time) *pgxpool.Pool {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	start := time.Now()
	if err := consoledata.Seed(context.Background(), pool, sz, at); err != nil {
		t.Fatalf("Seed(%+v): %v", sz, err)
	}
	t.Logf("seeded %+v in %.1f s", sz, time.Since(start).Seconds())
	return pool
}

// none fails the test with each break that some rows make.
func none(t *testing.T, breaks []fixture.Break) {
	t.Helper()
	for _, b := range breaks {
		if b.N != 0 {
			t.Errorf("%d %s", b.N, b.What)
		}
	}
}

func checkCounts(t *testing.T, pool *pgxpool.Pool, sz consoledata.Sizes) {
	t.Helper()
	got := fixture.ConsoleDataSizesOf(t, pool)
	for table, n := range map[string][2]int{
		"user_profiles":                {got.Profiles, sz.Users},
		"user_engagement_states":       {got.States, sz.Users},
		"engagement_state_transitions": {got.Transitions, sz.Transitions},
		"engagement_message_queue":     {got.Messages, sz.Messages},
	} {
		if n[0] != n[1] {
			t.Errorf("%s has %d rows, want %d", table, n[0], n[1])
		}
	}
}

// checkLog checks that every user's log is a legal walk of the state
// machine's table in time order, ending in their state, and that the
// daily job's moves belong to that day's engagement-daily run, inside its
// time; the bot's to none.
func checkLog(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	none(t, fixture.ConsoleDataLogBreaks(t, pool))
}

// checkQueue checks the queue's keys and its ties to the log and the runs.
func checkQueue(t *testing.T, pool *pgxpool.Pool, asOf time.Time) {
	t.Helper()
	none(t, fixture.ConsoleDataQueueBreaks(t, pool, asOf))
	for _, s := range fixture.ConsoleDataMixOf(t, pool).Statuses {
		t.Logf("messages %-10s %6s%% (%d)", s.Value, s.Share, s.N)
	}
}

// checkVerify runs engagementctl verify's checks as of the seed's as-of.
// Every one holds on the generated data: it is built to (see the package
// comment), so none is left out here.
func checkVerify(t *testing.T, pool *pgxpool.Pool, at time.Time) {
	t.Helper()
	start := time.Now()
	rep, err := verify.Run(context.Background(), pool, verify.Config{AsOf: at})
	if err != nil {
		t.Fatalf("verify.Run: %v", err)
	}
	t.Logf("verify took %.1f s", time.Since(start).Seconds())
	for _, c := range rep.Checks {
		if !c.OK {
			t.Errorf("verify's %s fails: %d violations (%d exempt), e.g. %v", c.Name, c.Violations, c.Exempt, c.Examples)
		} else if c.Exempt > 0 {
			t.Logf("verify's %s holds (%d exempt)", c.Name, c.Exempt)
		}
	}
}

func TestSeed(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Time{
		asOf,
		// The console benchmark's: a Monday morning, the week's reviews
		// queued an hour before and held by quiet hours until 12:00 UTC.
		time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC),
	} {
		t.Run(at.Format(time.RFC3339), func(t *testing.T) {
			t.Parallel()
			testSeed(t, at)
		})
	}
}

func testSeed(t *testing.T, asOf time.Time) {
	pool := seed(t, small, asOf)
	checkCounts(t, pool, small)
	checkLog(t, pool)
	checkQueue(t, pool, asOf)
	checkVerify(t, pool, asOf)
	// At about two moves a user, every history fits the window (with
	// many more, the oldest moves may lie before it). Every run has
	// counters; the daily ones count the log's moves.
	none(t, fixture.ConsoleDataRunBreaks(t, pool, asOf))
	if n := fixture.ConsoleDataStaging(t, pool); n != 0 {
		t.Errorf("%d staging relations left behind", n)
	}

	// The mix of states the console's pages show.
	for _, s := range fixture.ConsoleDataMixOf(t, pool).States {
		t.Logf("state %-13s %5s%%", s.Value, s.Share)
	}

	// The console's forecast of the coming days has goodbyes due: active
	// users fall silent over the week. Each day's forecast is asked of the
	// database as it is, so it counts every user due by then.
	var due []int
	for d := 1; d <= 7; d++ {
		next := time.Date(asOf.Year(), asOf.Month(), asOf.Day()+d, 6, 0, 0, 0, time.UTC)
		steps, err := scheduler.ForecastDaily(context.Background(), pool, next, sm.Default)
		if err != nil {
			t.Fatalf("ForecastDaily(%s): %v", next, err)
		}
		for _, s := range steps {
			if s.Name == string(sm.Inactivity14d) {
				due = append(due, s.Succeeded)
			}
		}
	}
	if len(due) != 7 || due[6] == 0 {
		t.Errorf("the forecast of the next 7 days has no goodbye due: %v", due)
	}
	t.Logf("goodbyes due by each of the next 7 days: %v", due)

}

// Other shapes of sizes still give exact counts and legal logs: fewer
// transitions than users with a history, far more than the categories
// want, and fewer messages than the goodbyes (only the newest are kept).
func TestSeedOtherSizes(t *testing.T) {
	t.Parallel()
	for _, sz := range []consoledata.Sizes{
		{Users: 1_000, Messages: 3_000, Transitions: 200},
		{Users: 1_000, Messages: 5_000, Transitions: 6_000},
		{Users: 1_000, Messages: 100, Transitions: 2_000},
		{Users: 1_000, Messages: 0, Transitions: 0},
	} {
		pool := seed(t, sz, asOf)
		checkCounts(t, pool, sz)
		checkLog(t, pool)
	}
}

// Sizes whose reviews cannot fit the users' active weeks are refused with
// a reason, and the staging schema is not left behind.
func TestSeedRefusesImpossibleSizes(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	err := consoledata.Seed(context.Background(), pool, consoledata.Sizes{Users: 100, Messages: 100_000, Transitions: 200}, asOf)
	if err == nil || !strings.Contains(err.Error(), "user-weeks") {
		t.Fatalf("Seed of 1,000 messages a user: %v, want a refusal naming the user-weeks", err)
	}
	if n := fixture.ConsoleDataStaging(t, pool); n != 0 {
		t.Errorf("%d staging schemas left behind", n)
	}
}

// The same sizes and as-of give the same rows.
func TestSeedIsDeterministic(t *testing.T) {
	t.Parallel()
	sz := consoledata.Sizes{Users: 2_000, Messages: 8_000, Transitions: 4_000}
	if a, b := fixture.ConsoleDataDigest(t, seed(t, sz, asOf)), fixture.ConsoleDataDigest(t, seed(t, sz, asOf)); a != b {
		t.Errorf("two seeds of %+v differ: %s and %s", sz, a, b)
	}
}
