package main_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// saoPaulo is the zone of the example.
var saoPaulo = mustZone("America/Sao_Paulo")

func mustZone(name string) *time.Location {
	z, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return z
}

// writer is a user who wrote to the bot through engagement_fire (the bot's
// own call), silent since more than 14 days before the run.
type writer struct {
	zone  string        // user_profiles.timezone; "" for none
	clock time.Duration // the time of day they write, in loc
	loc   *time.Location
	days  []int // how many days before the run's day each message was
}

// newWriter makes the user and fires their messages, oldest first.
func newWriter(t *testing.T, pool *pgxpool.Pool, runAt time.Time, w writer) string {
	t.Helper()
	id := fixture.User(t, pool, fixture.UserOptions{LastActivity: runAt.AddDate(0, -6, 0)})
	if w.zone != "" {
		fixture.SetProfile(t, pool, id, fixture.ProfileChange{Timezone: &w.zone})
	}
	days := slices.Clone(w.days)
	slices.Sort(days)
	slices.Reverse(days)
	for _, d := range days {
		y, m, dd := runAt.In(w.loc).AddDate(0, 0, -d).Date()
		at := time.Date(y, m, dd, 0, 0, 0, 0, w.loc).Add(w.clock)
		if _, err := activity.Fire(context.Background(), pool, id, sm.UserMessage, activity.FireOptions{At: at}); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// goodbyeAt is when the user's goodbye is due, and the arm its move logged.
func goodbyeAt(t *testing.T, pool *pgxpool.Pool, id string) (time.Time, *string) {
	t.Helper()
	return fixture.GoodbyeTimingOf(t, pool, id)
}

// Issue 61, acceptance: engagement-daily --best-hour through the shipped
// binary, quiet hours 21:00-09:00 in São Paulo, run at 06:00 UTC (03:00
// there). A user who wrote at 20:05 São Paulo on three days of the last 90
// (and once at 10:00) gets the goodbye at 20:00 there the same day, 17
// hours later; one who wrote only twice, one whose hour (22:30) is inside
// the quiet hours and one whose third newest message is 100 days old keep
// the run's time; a user with no zone of their own wrote at 15:10 UTC and
// gets it at 15:00 UTC (12:00 in São Paulo, awake). Every goodbye's move
// says best_hour: the arm, whether or not the hour was known. A re-run the
// same day, and three hours later, queues nothing and moves nothing.
// Before migration 85 and the flag, every goodbye was due at the run's time.
func TestTheGoodbyeGoesAtTheUsersHour(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	runAt, _ := time.Parse(time.RFC3339, asOf)
	at := func(clock string) time.Duration {
		c, err := time.Parse("15:04", clock)
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(c.Hour())*time.Hour + time.Duration(c.Minute())*time.Minute
	}
	sp := "America/Sao_Paulo"
	evening := newWriter(t, pool, runAt, writer{zone: sp, clock: at("20:05"), loc: saoPaulo, days: []int{20, 30, 40}})
	// Once in the morning: 20:00 still wins.
	if _, err := activity.Fire(context.Background(), pool, evening, sm.UserMessage,
		activity.FireOptions{At: time.Date(2026, 10, 28, 10, 0, 0, 0, saoPaulo)}); err != nil {
		t.Fatal(err)
	}
	twice := newWriter(t, pool, runAt, writer{zone: sp, clock: at("20:05"), loc: saoPaulo, days: []int{20, 30}})
	night := newWriter(t, pool, runAt, writer{zone: sp, clock: at("22:30"), loc: saoPaulo, days: []int{20, 30, 40}})
	long := newWriter(t, pool, runAt, writer{zone: sp, clock: at("20:05"), loc: saoPaulo, days: []int{20, 100, 110}})
	utc := newWriter(t, pool, runAt, writer{clock: at("15:10"), loc: time.UTC, days: []int{15, 16, 17}})

	bin := binary(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	args := []string{"--best-hour", "--quiet-hours", "21:00-09:00", "--timezone", sp}
	daily := func(asOf string) map[string]stepCounts {
		return runDaily(t, func(a ...string) cmdtest.Result { return cmdtest.Run(t, bin, env, a...) },
			append([]string{"--as-of", asOf}, args...)...)
	}
	if got := daily(asOf)["inactivity_14d"]; got.Succeeded != 5 || got.Queued != 5 {
		t.Fatalf("inactivity_14d did %+v, want 5 moved and queued", got)
	}

	want := map[string]time.Time{
		evening: time.Date(2026, 11, 22, 20, 0, 0, 0, saoPaulo),
		twice:   runAt,
		night:   runAt,
		long:    runAt,
		utc:     time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC),
	}
	names := map[string]string{evening: "20:05 São Paulo", twice: "twice", night: "22:30, quiet", long: "third message 100 days old", utc: "15:10 UTC, no zone"}
	for id, w := range want {
		got, timing := goodbyeAt(t, pool, id)
		if !got.Equal(w) {
			t.Errorf("%s: goodbye due %s (%s in São Paulo), want %s", names[id], got.UTC().Format(time.RFC3339),
				got.In(saoPaulo).Format("15:04"), w.UTC().Format(time.RFC3339))
		}
		if got.Before(runAt) || got.After(runAt.Add(24*time.Hour)) {
			t.Errorf("%s: goodbye due %s, not within 24 hours of the run", names[id], got.UTC().Format(time.RFC3339))
		}
		if timing == nil || *timing != "best_hour" {
			t.Errorf("%s: the move's timing is %v, want best_hour (the arm, known hour or not)", names[id], timing)
		}
	}

	for _, again := range []string{asOf, runAt.Add(3 * time.Hour).Format(time.RFC3339)} {
		if got := daily(again)["inactivity_14d"]; got != (stepCounts{}) {
			t.Errorf("a re-run as of %s did %+v, want nothing", again, got)
		}
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}); n != 5 {
		t.Errorf("%d messages after the re-runs, want the 5 goodbyes", n)
	}
	if got, _ := goodbyeAt(t, pool, evening); !got.Equal(want[evening]) {
		t.Errorf("after the re-runs the evening goodbye is due %s, want %s", got, want[evening])
	}
}

// Issue 61: a run without --best-hour or --best-hour-percent schedules
// every goodbye at its time and logs no arm (timing NULL), whatever the
// users' hours: what the funnel counts as no comparison.
func TestWithoutTheFlagsNoArmIsLogged(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	runAt, _ := time.Parse(time.RFC3339, asOf)
	id := newWriter(t, pool, runAt, writer{zone: "America/Sao_Paulo", clock: 20 * time.Hour, loc: saoPaulo, days: []int{20, 30, 40}})
	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), "--as-of", asOf)
	if res.Code != 0 {
		t.Fatalf("engagement-daily: exit %d: %s", res.Code, res.Stderr)
	}
	got, timing := goodbyeAt(t, pool, id)
	if !got.Equal(runAt) || timing != nil {
		t.Errorf("without the flags: due %s with timing %v, want the run's time and none", got, timing)
	}
}

// arms lists the users each arm's log rows hold, sorted.
func arms(t *testing.T, db *pgxpool.Pool) (best, run []string) {
	t.Helper()
	for _, l := range fixture.LogRows(t, db, fixture.Logged{Trigger: "inactivity_14d"}) {
		switch {
		case l.Timing == nil:
		case *l.Timing == "best_hour":
			best = append(best, l.UserID)
		default:
			run = append(run, l.UserID)
		}
	}
	slices.Sort(best)
	slices.Sort(run)
	return best, run
}

// Issue 61, acceptance: the split is deterministic. The same 400 users in
// two databases: --best-hour-percent 30 through the shipped binary on one,
// in process as three shards on the other (ENGAGEMENT_BEST_HOUR_PERCENT);
// both put exactly the users whose bucket (engagement_holdout_bucket with
// the best hour's salt, computed here in Go) is below 3,000 in the
// best-hour arm and every other one in the run-time arm, held-out users
// in neither. The same users silent again three days later are in the same
// arms.
func TestTheBestHourSplitIsTheSameEveryRunAndProcess(t *testing.T) {
	t.Parallel()
	ids := make([]string, 400)
	for i := range ids {
		ids[i] = fixture.NewID()
	}
	slices.Sort(ids)
	one, oneURL := pgtest.NewPool(t)
	sharded, shardedURL := pgtest.NewPool(t)
	sameUsers(t, one, ids)
	sameUsers(t, sharded, ids)

	bin := binary(t)
	runOne := func(asOf string) {
		runDaily(t, func(a ...string) cmdtest.Result {
			return cmdtest.Run(t, bin, cmdtest.Env("DATABASE_URL="+oneURL), a...)
		},
			"--as-of", asOf, "--best-hour-percent", "30", "--holdout-percent", "10")
	}
	runOne(asOf)
	for _, shard := range []string{"0/3", "1/3", "2/3"} {
		env := cmdtest.Env("DATABASE_URL="+shardedURL, "ENGAGEMENT_BEST_HOUR_PERCENT=30", "ENGAGEMENT_HOLDOUT_PERCENT=10")
		runDaily(t, func(a ...string) cmdtest.Result { return cmdtest.Exec(t, jobcmd.NewDailyCommand, env, a...) },
			"--as-of", asOf, "--shard", shard)
	}

	var wantBest, wantRun []string
	for _, id := range ids {
		switch {
		case bucket(scheduler.DefaultHoldoutSalt, id) < 1000: // held out: no goodbye, no arm
		case bucket(scheduler.BestHourSalt, id) < 3000:
			wantBest = append(wantBest, id)
		default:
			wantRun = append(wantRun, id)
		}
	}
	if len(wantBest) < 60 || len(wantRun) < 180 {
		t.Fatalf("the Go hash puts %d in the best-hour arm and %d in the other of 400, want about 108 and 252", len(wantBest), len(wantRun))
	}
	for name, db := range map[string]*pgxpool.Pool{"the binary": one, "three shards in process": sharded} {
		best, run := arms(t, db)
		if !slices.Equal(best, wantBest) || !slices.Equal(run, wantRun) {
			t.Errorf("%s: %d best-hour and %d run-time users, the Go hash says %d and %d: not the same users",
				name, len(best), len(run), len(wantBest), len(wantRun))
		}
	}

	fixture.SetState(t, one, "", fixture.StateChange{State: "active", NoGoodbye: true})
	runAt, _ := time.Parse(time.RFC3339, asOf)
	runOne(runAt.Add(3 * 24 * time.Hour).Format(time.RFC3339))
	best, run := arms(t, one)
	if len(best) != 2*len(wantBest) || len(run) != 2*len(wantRun) ||
		!slices.Equal(slices.Compact(best), wantBest) || !slices.Equal(slices.Compact(run), wantRun) {
		t.Errorf("three days later: %d best-hour and %d run-time rows, want each user twice in the same arm", len(best), len(run))
	}
}

// Issue 61: everyone's best hour is 20:00. 30 users of São Paulo who write
// at 20:05 all get their goodbye due at 20:00 there (--best-hour, a
// simulated tomorrow); two of them were sent a weekly review an hour
// before. queue-process at 20:10 there with the shipped limits' shape
// (--daily-limit 10, --per-user-cap 1, quiet hours 21:00-09:00) sends 10
// goodbyes, to 10 users, none of them the two the cap holds (their
// goodbyes cancelled, 'frequency', as at any hour: the cap frees after
// the goodbye's day);
// the other 18 wait for the budget ('budget'), nobody is sent two. At 20:50
// the budget is still spent: nothing goes. The next day at 20:15 the
// rolling 24 hours free yesterday's 10 slots, and 10 more go, at the
// user's hour again: a cluster drains a budget's worth a day, at its hour.
func TestEveryonesHourIsTwentyAndTheBudgetHolds(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	tomorrow := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	runAt := tomorrow.Add(6 * time.Hour) // 03:00 in São Paulo
	var ids []string
	for range 30 {
		ids = append(ids, newWriter(t, pool, runAt, writer{zone: "America/Sao_Paulo", clock: 20*time.Hour + 5*time.Minute,
			loc: saoPaulo, days: []int{20, 30, 40}}))
	}
	eight := time.Date(tomorrow.Year(), tomorrow.Month(), tomorrow.Day(), 20, 0, 0, 0, saoPaulo)
	capped := ids[:2]
	for _, u := range capped {
		jid := fixture.ProfileOf(t, pool, u).WhatsappJID
		if jid == nil {
			t.Fatalf("user %s has no JID", u)
		}
		fixture.Queue(t, pool, fixture.Message{User: u, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
			Params: `{"count":"2"}`, JID: *jid, ScheduledFor: eight.Add(-time.Hour), Key: u + ":weekly_review:before",
			Status: "sent", SentAt: eight.Add(-time.Hour)})
	}

	env := cmdtest.Env("DATABASE_URL=" + url)
	sp := []string{"--quiet-hours", "21:00-09:00", "--timezone", "America/Sao_Paulo"}
	res := cmdtest.Run(t, binary(t), env, append([]string{"--as-of", runAt.Format(time.RFC3339), "--allow-future-as-of",
		"--best-hour", "--output", "json"}, sp...)...)
	if res.Code != 0 {
		t.Fatalf("engagement-daily: exit %d: %s", res.Code, res.Stderr)
	}
	n := 0
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Type: "goodbye"}) {
		if m.ScheduledFor.Equal(eight) {
			n++
		}
	}
	if n != 30 {
		t.Fatalf("%d goodbyes due at 20:00 in São Paulo, want all 30", n)
	}
	deliver := func(at time.Time) {
		t.Helper()
		args := append([]string{"--as-of", at.Format(time.RFC3339), "--allow-future-as-of", "--transport", "log",
			"--send-interval", "0", "--daily-limit", "10", "--per-user-cap", "1", "--output", "json"}, sp...)
		if res := cmdtest.Exec(t, queuecmd.NewCommand, env, args...); res.Code != 0 {
			t.Fatalf("queue-process --as-of %s: exit %d: %s", at.Format(time.RFC3339), res.Code, res.Stderr)
		}
	}
	goodbyes := func(where string, args ...any) int {
		t.Helper()
		return fixture.Count(t, pool, `SELECT count(*) FROM engagement_message_queue WHERE message_type = 'goodbye' AND `+where, args...)
	}

	deliver(eight.Add(10 * time.Minute))
	if n := goodbyes(`status = 'sent'`); n != 10 {
		t.Errorf("at 20:10: %d goodbyes sent, want the budget's 10", n)
	}
	if n := goodbyes(`status = 'sent' AND user_id = ANY($1::uuid[])`, capped); n != 0 {
		t.Errorf("at 20:10: %d goodbyes sent to the two users the cap holds", n)
	}
	// The cap frees a week after the review, past the goodbye's day: the
	// cap cancels it (and the daily job sends its user back to active).
	if n := goodbyes(`status = 'cancelled' AND cancel_reason = 'frequency' AND user_id = ANY($1::uuid[])`, capped); n != 2 {
		t.Errorf("at 20:10: %d of the two capped users' goodbyes cancelled by the cap, want 2", n)
	}
	if n := goodbyes(`status = 'pending' AND deferred_reason = 'budget'`); n != 18 {
		t.Errorf("at 20:10: %d goodbyes wait for the budget, want 18", n)
	}
	deliver(eight.Add(50 * time.Minute))
	if n := goodbyes(`status = 'sent'`); n != 10 {
		t.Errorf("at 20:50: %d goodbyes sent in all, want still 10 (the budget is spent)", n)
	}
	next := eight.AddDate(0, 0, 1).Add(15 * time.Minute)
	deliver(next)
	if n := goodbyes(`status = 'sent'`); n != 20 {
		t.Errorf("the next day at 20:15: %d goodbyes sent in all, want 20", n)
	}
	if n := goodbyes(`status = 'sent' AND sent_at >= $1 AND sent_at < $2`, next.Add(-15*time.Minute), next.Add(45*time.Minute)); n != 10 {
		t.Errorf("the next day: %d goodbyes sent between 20:00 and 21:00, want 10", n)
	}
	sentTo := map[string]int{}
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Type: "goodbye", Status: "sent"}) {
		sentTo[m.UserID]++
	}
	twice := 0
	for _, sent := range sentTo {
		if sent > 1 {
			twice++
		}
	}
	if twice != 0 {
		t.Errorf("%d users were sent two goodbyes", twice)
	}
}

// Issue 61: ENGAGEMENT_BEST_HOUR=true is --best-hour (every goodbye in the
// best-hour arm); a percent out of 0-100, or not a number, is a usage
// error (exit 2) before any work.
func TestTheBestHourFlagsAndTheirVariables(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 3, lastWeekOfOctober)
	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_BEST_HOUR=true"), "--as-of", asOf)
	if res.Code != 0 {
		t.Fatalf("ENGAGEMENT_BEST_HOUR=true: exit %d: %s", res.Code, res.Stderr)
	}
	if n := fixture.CountTransitions(t, pool, fixture.Moves{Trigger: "inactivity_14d", Timing: "best_hour"}); n != 3 {
		t.Errorf("ENGAGEMENT_BEST_HOUR=true: %d moves in the best-hour arm, want all 3", n)
	}
	for _, args := range [][]string{{"--best-hour-percent", "120"}, {"--best-hour-percent", "-1"}, {"--best-hour-percent", "half"}} {
		if res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), append([]string{"--as-of", asOf}, args...)...); res.Code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, res.Code, res.Stderr)
		}
	}
}
