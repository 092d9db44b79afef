package main_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 45, the contract's shape: engagementctl funnel --output json prints
// one object whose "cohorts" array holds the goodbye cohorts, each with a
// "treatment" and a "holdout" object with "users" and "reactivated", the
// totals outside "cohorts". 300 users due a goodbye, the daily job holding
// out 20 %; 30 of the treated and 6 of the held-out write again a day on:
// whatever the draw (the held-out are some 40 to 80 of the 300: random
// user ids), too few to tell the arms apart. With 3, a draw of 70 held out
// told them apart (+8.8 points, +0.3 to +14.5), and the test failed.
func TestFunnelCommandPrintsTheArms(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	runAt := time.Date(2026, 10, 6, 6, 0, 0, 0, time.UTC)
	fixture.InactiveUsers(t, pool, 300, runAt.Add(-20*24*time.Hour))
	if res := cmdtest.Exec(t, jobcmd.NewDailyCommand, env, "--as-of", runAt.Format(time.RFC3339), "--holdout-percent", "20"); res.Code != 0 {
		t.Fatalf("engagement-daily: exit %d: %s", res.Code, res.Stderr)
	}
	// The log's times are the database clock's; the report is read as of
	// 40 days after the goodbyes were logged, when their window is closed.
	logged := fixture.Now(t, pool)
	fixture.CtlReactivateGoodbyes(t, pool, 30, 6)
	asOf := logged.Add(40 * 24 * time.Hour).UTC().Format(time.RFC3339)

	res := cmdtest.Exec(t, ctl.NewCommand, env, "funnel", "--output", "json", "--as-of", asOf, "--weeks", "8")
	if res.Code != 0 {
		t.Fatalf("funnel --output json: exit %d: %s", res.Code, res.Stderr)
	}
	type arm struct{ Users, Reactivated *int64 }
	var rep struct {
		Cohorts []struct {
			Treatment, Holdout *arm
			StillCounting      bool `json:"still_counting"`
		}
		Treatment, Holdout *arm
		Lift               *struct{ Difference, Low, High *float64 }
		Method             string
	}
	dec := json.NewDecoder(strings.NewReader(res.Stdout))
	if err := dec.Decode(&rep); err != nil || dec.More() {
		t.Fatalf("stdout is not one JSON object (%v): %s", err, res.Stdout)
	}
	if len(rep.Cohorts) != 1 {
		t.Fatalf("cohorts %+v, want the one week of goodbyes", rep.Cohorts)
	}
	c := rep.Cohorts[0]
	if c.Treatment == nil || c.Holdout == nil || c.Treatment.Users == nil || c.Treatment.Reactivated == nil ||
		c.Holdout.Users == nil || c.Holdout.Reactivated == nil {
		t.Fatalf("cohort %+v lacks treatment and holdout with users and reactivated: %s", c, res.Stdout)
	}
	held := 0
	for _, l := range fixture.LogRows(t, pool, fixture.Logged{}) {
		if l.Holdout {
			held++
		}
	}
	if *c.Treatment.Users != int64(300-held) || *c.Holdout.Users != int64(held) || *c.Treatment.Reactivated != 30 ||
		*c.Holdout.Reactivated != 6 || c.StillCounting {
		t.Errorf("cohort: treatment %d/%d, holdout %d/%d, still counting %v; want 30/%d, 6/%d, closed",
			*c.Treatment.Reactivated, *c.Treatment.Users, *c.Holdout.Reactivated, *c.Holdout.Users, c.StillCounting, 300-held, held)
	}
	if rep.Treatment == nil || rep.Holdout == nil || *rep.Treatment.Users != *c.Treatment.Users || *rep.Holdout.Users != *c.Holdout.Users ||
		rep.Lift == nil || rep.Lift.Low == nil || !strings.Contains(rep.Method, "Newcombe") {
		t.Errorf("totals outside cohorts: treatment %+v, holdout %+v, lift %+v, method %q", rep.Treatment, rep.Holdout, rep.Lift, rep.Method)
	}

	text := cmdtest.Exec(t, ctl.NewCommand, env, "funnel", "--as-of", asOf, "--weeks", "8")
	if text.Code != 0 || !strings.Contains(text.Stdout, "pooled (1)") || !strings.Contains(text.Stdout, "not enough users yet to tell") {
		t.Errorf("funnel text: exit %d:\n%s%s", text.Code, text.Stdout, text.Stderr)
	}
}

// Issue 56, finding 7: weeks are half-open, [Monday 00:00, next Monday
// 00:00) UTC. A goodbye logged at exactly Monday 00:00:00 belongs to the
// week that Monday starts; the funnel counted it in the week before
// (pooled treated users 15 instead of 11), and one at exactly the first
// week's Monday not at all. As of Sunday 2026-11-22, 8 weeks (from the
// week of 2026-09-28), all closed:
//
//	2026-09-27 23:59:59  1 treated: before the window, not counted
//	2026-09-28 00:00:00  2 treated, 1 held out: the first week's (old: dropped)
//	2026-10-07 12:00:00  11 treated, 3 held out: the week of 10-05
//	2026-10-12 00:00:00  4 treated, 1 held out: the week of 10-12 (old: 10-05's)
func TestFunnelWeeksStartAtMondayMidnight(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	goodbyes := func(at time.Time, holdout bool, n int) {
		for range n {
			fixture.LogMove(t, pool, fixture.Move{User: fixture.NewID(), From: "active", To: "goodbye_sent", Trigger: "inactivity_14d",
				Holdout: holdout, At: at})
		}
	}
	goodbyes(time.Date(2026, 9, 27, 23, 59, 59, 0, time.UTC), false, 1)
	first := time.Date(2026, 9, 28, 0, 0, 0, 0, time.UTC)
	goodbyes(first, false, 2)
	goodbyes(first, true, 1)
	goodbyes(time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC), false, 11)
	goodbyes(time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC), true, 3)
	goodbyes(time.Date(2026, 10, 12, 0, 0, 0, 0, time.UTC), false, 4)
	goodbyes(time.Date(2026, 10, 12, 0, 0, 0, 0, time.UTC), true, 1)

	res := cmdtest.Exec(t, ctl.NewCommand, env, "funnel", "--output", "json", "--as-of", "2026-11-22T06:00:00Z", "--weeks", "8")
	if res.Code != 0 {
		t.Fatalf("funnel --output json: exit %d: %s", res.Code, res.Stderr)
	}
	type arm struct{ Users int64 }
	var rep struct {
		Cohorts []struct {
			WeekStart          time.Time `json:"week_start"`
			Treatment, Holdout arm
		}
		Treatment, Holdout arm
		PooledCohorts      int `json:"pooled_cohorts"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("stdout is not the report (%v): %s", err, res.Stdout)
	}
	var got []string
	for _, c := range rep.Cohorts {
		got = append(got, fmt.Sprintf("%s %d/%d", c.WeekStart.UTC().Format(time.DateOnly), c.Treatment.Users, c.Holdout.Users))
	}
	want := []string{"2026-09-28 2/1", "2026-10-05 11/3", "2026-10-12 4/1"}
	if !slices.Equal(got, want) {
		t.Errorf("cohorts (week treated/held out) %v, want %v", got, want)
	}
	if rep.Treatment.Users != 17 || rep.Holdout.Users != 5 || rep.PooledCohorts != 3 {
		t.Errorf("pooled: %d treated, %d held out over %d cohorts; want 17, 5 over 3", rep.Treatment.Users, rep.Holdout.Users, rep.PooledCohorts)
	}
}
