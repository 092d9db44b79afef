package main_test

import (
	"testing"

	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pushtest"
)

// Issue 24, point 3: two environments pushing to one Pushgateway
// overwrote each other's groups (grouping key: job, shard). With
// --metrics-environment (ENGAGEMENT_ENVIRONMENT) each keeps its own, under
// an environment label; a value the gateway's URL cannot carry is exit 2.
func TestEnvironmentsKeepTheirOwnMetricGroups(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	for _, env := range []struct {
		name  string
		users int
	}{{"staging", 3}, {"production", 7}} {
		pool, url := pgtest.NewPool(t)
		fixture.InactiveUsers(t, pool, env.users, lastWeekOfOctober)
		res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url, "PUSHGATEWAY_URL="+gw.URL, "ENGAGEMENT_ENVIRONMENT="+env.name),
			"--as-of", asOf, "--output", "json")
		if res.Code != 0 {
			t.Fatalf("%s: exit %d: %s", env.name, res.Code, res.Stderr)
		}
	}
	got := gw.Metrics(t, "engagement_")
	for env, queued := range map[string]float64{"staging": 3, "production": 7} {
		wantSample(t, got, queued, metrics.JobMessages, "job", "engagement-daily", "environment", env, "step", "inactivity_14d", "result", "queued")
	}

	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL=postgres://x@127.0.0.1:1/x", "PUSHGATEWAY_URL="+gw.URL),
		"--metrics-environment", "prod/eu")
	if res.Code != 2 {
		t.Errorf("--metrics-environment prod/eu: exit %d, stderr %q; want 2", res.Code, res.Stderr)
	}
}
