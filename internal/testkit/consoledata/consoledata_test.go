package consoledata_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/consoledata"
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

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// zero fails the test with what when sql counts anything.
func zero(t *testing.T, pool *pgxpool.Pool, what, sql string, args ...any) {
	t.Helper()
	if n := count(t, pool, sql, args...); n != 0 {
		t.Errorf("%d %s", n, what)
	}
}

func checkCounts(t *testing.T, pool *pgxpool.Pool, sz consoledata.Sizes) {
	t.Helper()
	for table, want := range map[string]int{
		"user_profiles":                sz.Users,
		"user_engagement_states":       sz.Users,
		"engagement_state_transitions": sz.Transitions,
		"engagement_message_queue":     sz.Messages,
	} {
		if got := count(t, pool, "SELECT count(*) FROM "+table); got != int64(want) {
			t.Errorf("%s has %d rows, want %d", table, got, want)
		}
	}
}

// checkLog checks that every user's log is a legal walk of the state
// machine's table in time order, ending in their state.
func checkLog(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	zero(t, pool, "log rows whose from_state is not the previous row's to_state", `
		SELECT count(*) FROM (
		    SELECT from_state, lag(to_state) OVER (PARTITION BY user_id ORDER BY id) AS prev
		      FROM engagement_state_transitions) l
		 WHERE prev IS NOT NULL AND prev <> from_state`)
	zero(t, pool, "log rows not after the user's previous one", `
		SELECT count(*) FROM (
		    SELECT created_at, lag(created_at) OVER (PARTITION BY user_id ORDER BY id) AS prev
		      FROM engagement_state_transitions) l
		 WHERE prev >= created_at`)
	zero(t, pool, "users whose latest log row does not lead to their state", `
		SELECT count(*) FROM user_engagement_states s
		  JOIN LATERAL (SELECT to_state FROM engagement_state_transitions l
		                 WHERE l.user_id = s.user_id ORDER BY l.id DESC LIMIT 1) l ON true
		 WHERE l.to_state <> s.state`)

	var from, trigger, to []string
	for _, tr := range sm.Transitions() {
		from, trigger, to = append(from, string(tr.From)), append(trigger, string(tr.Trigger)), append(to, string(tr.To))
	}
	zero(t, pool, "log rows that are no row of statemachine.Transitions", `
		SELECT count(*) FROM engagement_state_transitions l
		 WHERE NOT EXISTS (SELECT 1 FROM unnest($1::text[], $2::text[], $3::text[]) AS a (f, g, d)
		                    WHERE a.f = l.from_state AND a.g = l.trigger AND a.d = l.to_state)`, from, trigger, to)

	// The daily job's moves belong to that day's engagement-daily run,
	// inside its time; the bot's to none.
	zero(t, pool, "scheduler moves without their day's daily run", `
		SELECT count(*) FROM engagement_state_transitions l
		  LEFT JOIN engagement_job_runs r ON r.id = l.job_run_id
		 WHERE l.trigger IN ('inactivity_14d', 'goodbye_timeout', 'goodbye_undelivered', 'reminder_due')
		   AND (r.id IS NULL OR r.job <> 'engagement-daily' OR r.status = 'failed'
		        OR date_trunc('day', r.as_of) <> date_trunc('day', l.created_at)
		        OR l.created_at NOT BETWEEN r.started_at AND r.finished_at)`)
	zero(t, pool, "bot moves with a run", `
		SELECT count(*) FROM engagement_state_transitions
		 WHERE trigger NOT IN ('inactivity_14d', 'goodbye_timeout', 'goodbye_undelivered', 'reminder_due')
		   AND job_run_id IS NOT NULL`)
}

// checkQueue checks the queue's keys and its ties to the log and the runs.
func checkQueue(t *testing.T, pool *pgxpool.Pool, asOf time.Time) {
	t.Helper()
	// The unique index would have refused a duplicate; this also finds
	// messages without a key.
	zero(t, pool, "messages without a unique idempotency key", `
		SELECT count(*) - count(DISTINCT idempotency_key) FROM engagement_message_queue`)
	zero(t, pool, "goodbyes without their inactivity_14d", `
		SELECT count(*) FROM engagement_message_queue q
		 WHERE q.message_type = 'goodbye'
		   AND NOT EXISTS (SELECT 1 FROM engagement_state_transitions l
		                    WHERE l.user_id = q.user_id AND l.trigger = 'inactivity_14d'
		                      AND l.created_at = q.created_at AND l.job_run_id = q.job_run_id)`)
	zero(t, pool, "messages of a run that is not their job's", `
		SELECT count(*) FROM engagement_message_queue q
		  LEFT JOIN engagement_job_runs r ON r.id = q.job_run_id
		 WHERE r.id IS NULL
		    OR r.job <> CASE q.message_type WHEN 'weekly_review' THEN 'engagement-weekly' ELSE 'engagement-daily' END
		    OR q.created_at NOT BETWEEN r.started_at AND r.finished_at`)
	zero(t, pool, "messages whose status and columns disagree", `
		SELECT count(*) FROM engagement_message_queue
		 WHERE (status = 'sent') <> (sent_at IS NOT NULL)
		    OR (status = 'cancelled') <> (cancel_reason IS NOT NULL)
		    OR (status = 'processing') <> (claimed_until IS NOT NULL AND claimed_by IS NOT NULL)
		    OR (status = 'failed' AND error_message IS NULL)
		    OR sent_at > $1 OR created_at > $1 OR sent_at < scheduled_for
		    OR (status = 'processing' AND claimed_until <= $1)`, asOf)

	rows, err := pool.Query(context.Background(), `
		SELECT status, round(100.0 * count(*) / sum(count(*)) OVER (), 2)::text, count(*)
		  FROM engagement_message_queue GROUP BY status ORDER BY status`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var status, share string
		var n int64
		if err := rows.Scan(&status, &share, &n); err != nil {
			t.Fatal(err)
		}
		t.Logf("messages %-10s %6s%% (%d)", status, share, n)
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
	// many more, the oldest moves may lie before it).
	zero(t, pool, "log rows outside the 12 weeks before the as-of", `
		SELECT count(*) FROM engagement_state_transitions
		 WHERE created_at < $1::timestamptz - interval '12 weeks' OR created_at > $1::timestamptz`, asOf)
	zero(t, pool, "staging relations left behind", `
		SELECT count(*) FROM pg_namespace WHERE nspname = 'consoledata'`)

	// The mix of states the console's pages show.
	rows, err := pool.Query(context.Background(), `
		SELECT state, round(100.0 * count(*) / sum(count(*)) OVER (), 1)::text FROM user_engagement_states GROUP BY 1 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var state, share string
		if err := rows.Scan(&state, &share); err != nil {
			t.Fatal(err)
		}
		t.Logf("state %-13s %5s%%", state, share)
	}
	rows.Close()

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

	// Every run has counters; the daily ones count the log's moves.
	zero(t, pool, "runs without counters", `SELECT count(*) FROM engagement_job_runs WHERE counters IS NULL`)
	zero(t, pool, "daily runs whose counters disagree with the log", `
		SELECT count(*) FROM engagement_job_runs r
		 WHERE r.job = 'engagement-daily' AND r.status <> 'failed'
		   AND (r.counters -> 'steps' -> 'inactivity_14d' ->> 'succeeded')::int
		       <> (SELECT count(*) FROM engagement_state_transitions l WHERE l.job_run_id = r.id AND l.trigger = 'inactivity_14d')`)
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
	zero(t, pool, "staging schemas left behind", `SELECT count(*) FROM pg_namespace WHERE nspname = 'consoledata'`)
}

// The same sizes and as-of give the same rows.
func TestSeedIsDeterministic(t *testing.T) {
	t.Parallel()
	sz := consoledata.Sizes{Users: 2_000, Messages: 8_000, Transitions: 4_000}
	digest := func(pool *pgxpool.Pool) string {
		var d string
		err := pool.QueryRow(context.Background(), `
			SELECT md5((SELECT string_agg(q::text, '|' ORDER BY id) FROM engagement_message_queue q)
			           || (SELECT string_agg(l::text, '|' ORDER BY id) FROM engagement_state_transitions l)
			           || (SELECT string_agg(s::text, '|' ORDER BY user_id) FROM user_engagement_states s))`).Scan(&d)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if a, b := digest(seed(t, sz, asOf)), digest(seed(t, sz, asOf)); a != b {
		t.Errorf("two seeds of %+v differ: %s and %s", sz, a, b)
	}
}
