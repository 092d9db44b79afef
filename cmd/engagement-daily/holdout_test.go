package main_test

import (
	"crypto/md5" //nolint:gosec // the holdout's hash (migration 55), for its spread, not for secrecy
	be "encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// bucket is engagement_holdout_bucket (migration 55) computed in Go: the
// first 32 bits of md5(salt ":" user id), unsigned, modulo 10000. The
// database and this agree, so the group is the same on any database.
func bucket(salt, userID string) int {
	sum := md5.Sum([]byte(salt + ":" + userID)) //nolint:gosec // the same hash as the database's, not a secret
	return int(be.BigEndian.Uint32(sum[:4]) % 10000)
}

// stepCounts is one step of a job's JSON summary.
type stepCounts struct {
	Succeeded int `json:"succeeded"`
	Queued    int `json:"queued"`
	HeldOut   int `json:"held_out"`
}

// runDaily runs the daily job with args and returns its steps' counters.
func runDaily(t *testing.T, run func(args ...string) cmdtest.Result, args ...string) map[string]stepCounts {
	t.Helper()
	res := run(append([]string{"--output", "json"}, args...)...)
	if res.Code != 0 {
		t.Fatalf("engagement-daily %v: exit %d: %s", args, res.Code, res.Stderr)
	}
	var sum struct {
		Steps map[string]stepCounts `json:"steps"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatalf("engagement-daily %v: summary %q: %v", args, res.Stdout, err)
	}
	return sum.Steps
}

// heldOut lists the users the goodbyes' log rows say were held out, sorted.
func heldOut(t *testing.T, db *pgxpool.Pool) []string {
	t.Helper()
	ids := []string{}
	for _, l := range fixture.LogRows(t, db, fixture.Logged{Trigger: "inactivity_14d"}) {
		if l.Holdout {
			ids = append(ids, l.UserID)
		}
	}
	slices.Sort(ids)
	return ids
}

// Issue 45: engagement-daily --holdout-percent 10 over 2,000 users due a
// goodbye. The shipped binary holds out a share within a binomial bound of
// 10 %, exactly the users whose bucket (computed here in Go) is below
// 1,000, and the dry run counted the same; each held-out user takes the
// same move as a treated one (goodbye_sent, 48 hours from the run, logged
// with holdout) and has no message at all; opted-out users and a reminder
// are untouched by it, and so are the weekly reviews. queue-process then
// sends every goodbye but theirs,
// verify finds every invariant holding (the held-out users have no goodbye
// and need none), and the daily run 49 hours on times the held-out users
// out into dormant like anyone whose goodbye went unanswered.
func TestHoldoutKeepsTenPercentOfTwoThousandFromTheGoodbye(t *testing.T) {
	t.Parallel()
	const users, percent = 2000, 10
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, users, lastWeekOfOctober)
	var optedOut []string
	for range 20 {
		optedOut = append(optedOut, fixture.User(t, pool, fixture.UserOptions{LastActivity: lastWeekOfOctober, OptedOut: true}))
	}
	runAt, _ := time.Parse(time.RFC3339, asOf)
	reminded := fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: lastWeekOfOctober,
		RemindAt: fixture.Ptr(runAt.Add(-time.Hour))})
	// Users active this week, due a weekly review, every one of them in
	// the holdout's buckets at 100 %.
	var reviewed []string
	for range 5 {
		u := fixture.User(t, pool, fixture.UserOptions{LastActivity: runAt.Add(-24 * time.Hour)})
		fixture.Transactions(t, pool, u, runAt.Add(-24*time.Hour))
		reviewed = append(reviewed, u)
	}

	env := cmdtest.Env("DATABASE_URL=" + url)
	bin := binary(t)
	daily := func(args ...string) cmdtest.Result { return cmdtest.Run(t, bin, env, args...) }
	dry := runDaily(t, daily, "--as-of", asOf, "--holdout-percent", "10", "--send-reminder", "--dry-run")
	steps := runDaily(t, daily, "--as-of", asOf, "--holdout-percent", "10", "--send-reminder")
	goodbyes := steps["inactivity_14d"]

	// Binomial(2000, 0.1): mean 200, standard deviation 13.4; 5 of them
	// either side is 133 to 267 (a random set of ids falls outside about
	// once in 1.7 million runs).
	mean, sd := float64(users*percent/100), math.Sqrt(users*0.1*0.9)
	if got := float64(goodbyes.HeldOut); math.Abs(got-mean) > 5*sd {
		t.Errorf("held out %d of %d at %d %%, want %.0f ± %.0f", goodbyes.HeldOut, users, percent, mean, 5*sd)
	}
	if goodbyes.Succeeded != users || goodbyes.Queued != users-goodbyes.HeldOut {
		t.Errorf("inactivity_14d moved %d and queued %d with %d held out, want %d moved, the rest queued",
			goodbyes.Succeeded, goodbyes.Queued, goodbyes.HeldOut, users)
	}
	if d := dry["inactivity_14d"]; d != goodbyes {
		t.Errorf("the dry run counted %+v, the run did %+v", d, goodbyes)
	}

	held := heldOut(t, pool)
	if len(held) != goodbyes.HeldOut {
		t.Fatalf("%d log rows say held out, the summary %d", len(held), goodbyes.HeldOut)
	}
	all := fixture.Users(t, pool, fixture.Pick{}) // every user has a profile and a state row
	var want []string
	for _, id := range all {
		if bucket(scheduler.DefaultHoldoutSalt, id) < percent*100 && !slices.Contains(optedOut, id) && id != reminded &&
			!slices.Contains(reviewed, id) {
			want = append(want, id)
		}
	}
	if !slices.Equal(held, want) {
		t.Errorf("held out %d users, the Go hash says %d: not the same users", len(held), len(want))
	}
	expires := runAt.Add(48 * time.Hour)
	n := 0
	for _, s := range fixture.StateRows(t, pool, held...) {
		if len(held) > 0 && s.State == "goodbye_sent" && s.GoodbyeSentAt != nil && s.GoodbyeSentAt.Equal(runAt) &&
			s.GoodbyeExpiresAt != nil && s.GoodbyeExpiresAt.Equal(expires) {
			n++
		}
	}
	if n != len(held) {
		t.Errorf("%d of %d held-out users are in goodbye_sent from the run with their 48 hours, want all", n, len(held))
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Users: held}); n != 0 {
		t.Errorf("%d messages queued for held-out users, want none", n)
	}
	n = 0
	for _, l := range fixture.LogRows(t, pool, fixture.Logged{}) {
		if slices.Contains(optedOut, l.UserID) || l.Holdout && l.Trigger != "inactivity_14d" {
			n++
		}
	}
	if n != 0 {
		t.Errorf("%d log rows for opted-out users or held-out moves other than a goodbye, want none", n)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Users: []string{reminded}, Type: "reminder"}); n != 1 {
		t.Errorf("the due reminder queued %d times, want once: the holdout is the goodbye's alone", n)
	}

	// The weekly job knows no holdout: with ENGAGEMENT_HOLDOUT_PERCENT=100
	// in its environment, every user due a review gets one.
	weekly := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_HOLDOUT_PERCENT=100"),
		"--as-of", asOf, "--skip-send")
	if n := fixture.CountMessages(t, pool, fixture.Messages{Users: reviewed, Type: "weekly_review"}); weekly.Code != 0 || n != len(reviewed) {
		t.Errorf("engagement-weekly beside a holdout: exit %d, %d of %d reviews queued: %s", weekly.Code, n, len(reviewed), weekly.Stderr)
	}

	// Delivery: everything queued goes, and nothing to a held-out user.
	q := cmdtest.Exec(t, queuecmd.NewCommand, env, "--transport", "log", "--send-interval", "0", "--output", "json")
	var sent delivery.ProcessSummary
	if err := json.Unmarshal([]byte(q.Stdout), &sent); q.Code != 0 || err != nil {
		t.Fatalf("queue-process: exit %d, %v: %s", q.Code, err, q.Stderr)
	}
	if want := users - len(held) + 1 + len(reviewed); sent.Sent != want {
		t.Errorf("queue-process sent %d, want %d (the treated users' goodbyes, the reminder and the reviews)", sent.Sent, want)
	}
	if n := fixture.SendsOfUsers(t, pool, held); n != 0 {
		t.Errorf("%d sends recorded for held-out users, want none", n)
	}
	v := cmdtest.Exec(t, ctl.NewCommand, env, "verify", "--as-of", asOf, "--output", "json")
	if v.Code != 0 {
		t.Errorf("verify after the run and its delivery: exit %d: %s%s", v.Code, v.Stdout, v.Stderr)
	}

	// 48 hours from the run, and one: the held-out users' time is up, as
	// for a goodbye delivered at the run.
	later := runAt.Add(49 * time.Hour).Format(time.RFC3339)
	runDaily(t, daily, "--as-of", later, "--holdout-percent", "10")
	if n := fixture.CountStates(t, pool, fixture.States{State: "dormant", Users: held}); n != len(held) {
		t.Errorf("%d of %d held-out users dormant 49 hours after the run, want all", n, len(held))
	}
	if v := cmdtest.Exec(t, ctl.NewCommand, env, "verify", "--as-of", later); v.Code != 0 {
		t.Errorf("verify 49 hours on: exit %d: %s%s", v.Code, v.Stdout, v.Stderr)
	}
}

// sameUsers inserts the given ids, each silent since lastWeekOfOctober
// with a JID, into a database.
func sameUsers(t *testing.T, db *pgxpool.Pool, ids []string) {
	t.Helper()
	users := make([]fixture.DailyUser, len(ids))
	for i, id := range ids {
		users[i] = fixture.DailyUser{ID: id, JID: fmt.Sprintf("5511%09d@s.whatsapp.net", i+1), State: "active",
			LastActivity: lastWeekOfOctober}
	}
	fixture.DailyUsers(t, db, users...)
}

// Issue 45: who is held out depends on the user id alone. The same 600
// users in four databases: one run; three shards (3 runs); a run at 5 %;
// a run with another salt. The shards hold out the same users as the
// single run; 5 % holds out a subset of 10 % (raising the percent later
// keeps everyone held out so far); another salt draws another group. A
// re-run the same day flips nobody, and the same users silent again a
// week later are held out again, the same ones.
func TestHoldoutIsTheSameOnEveryRunShardAndDatabase(t *testing.T) {
	t.Parallel()
	ids := make([]string, 600)
	for i := range ids {
		ids[i] = fixture.NewID()
	}
	type db struct {
		pool *pgxpool.Pool
		run  func(args ...string) cmdtest.Result
	}
	open := func() db {
		pool, url := pgtest.NewPool(t)
		sameUsers(t, pool, ids)
		env := cmdtest.Env("DATABASE_URL=" + url)
		return db{pool, func(args ...string) cmdtest.Result { return cmdtest.Exec(t, jobcmd.NewDailyCommand, env, args...) }}
	}
	single, sharded, fewer, salted := open(), open(), open(), open()

	runDaily(t, single.run, "--as-of", asOf, "--holdout-percent", "10")
	for _, shard := range []string{"0/3", "1/3", "2/3"} {
		runDaily(t, sharded.run, "--as-of", asOf, "--holdout-percent", "10", "--shard", shard)
	}
	runDaily(t, fewer.run, "--as-of", asOf, "--holdout-percent", "5")
	runDaily(t, salted.run, "--as-of", asOf, "--holdout-percent", "10", "--holdout-salt", "spring-2027")

	group := heldOut(t, single.pool)
	if len(group) < 20 || len(group) > 110 {
		t.Fatalf("held out %d of 600 at 10 %%, want about 60", len(group))
	}
	if got := heldOut(t, sharded.pool); !slices.Equal(got, group) {
		t.Errorf("three shards held out %d users, one run %d: not the same users", len(got), len(group))
	}
	half := heldOut(t, fewer.pool)
	for _, id := range half {
		if !slices.Contains(group, id) {
			t.Errorf("%s is held out at 5 %% but not at 10 %%", id)
		}
	}
	if len(half) == 0 || len(half) >= len(group) {
		t.Errorf("held out %d at 5 %% and %d at 10 %%, want fewer, and some", len(half), len(group))
	}
	if got := heldOut(t, salted.pool); slices.Equal(got, group) {
		t.Errorf("another salt held out the same %d users, want another group", len(got))
	}

	if again := runDaily(t, single.run, "--as-of", asOf, "--holdout-percent", "10"); again["inactivity_14d"] != (stepCounts{}) {
		t.Errorf("a re-run of the same day did %+v, want nothing", again["inactivity_14d"])
	}
	// Everyone back to active and silent again: three days later the same
	// users are held out.
	fixture.SetState(t, single.pool, "", fixture.StateChange{State: "active", NoGoodbye: true})
	runAt, _ := time.Parse(time.RFC3339, asOf)
	runDaily(t, single.run, "--as-of", runAt.Add(3*24*time.Hour).Format(time.RFC3339), "--holdout-percent", "10")
	var counts struct{ Rows, Users int }
	heldUsers := map[string]bool{}
	for _, l := range fixture.LogRows(t, single.pool, fixture.Logged{Trigger: "inactivity_14d"}) {
		if l.Holdout {
			counts.Rows++
			heldUsers[l.UserID] = true
		}
	}
	counts.Users = len(heldUsers)
	if counts.Rows != 2*len(group) || counts.Users != len(group) {
		t.Errorf("after two goodbye runs three days apart: %d held-out rows of %d users, want %d of the same %d",
			counts.Rows, counts.Users, 2*len(group), len(group))
	}
}
