package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/posthogtest"
)

// One engagement_weekly_review_sent per review the run queued; a re-run of
// the same week queues nothing and sends nothing.
func TestWeeklyAnalyticsEvents(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	asOf := time.Date(2021, 1, 1, 9, 0, 0, 0, time.UTC)      // a Friday of ISO week 2020-W53
	fixture.InactiveUsers(t, pool, 12, asOf.Add(-time.Hour)) // active an hour ago
	srv := posthogtest.NewServer(t)
	const key = "phc_weekly_s3cr3t"
	env := cmdtest.Env("DATABASE_URL="+url, "POSTHOG_API_KEY="+key, "POSTHOG_HOST="+srv.URL)

	res := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, env, "--as-of", asOf.Format(time.RFC3339), "--output", "json")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	if strings.Contains(res.Stderr, key) {
		t.Errorf("stderr contains the PostHog API key: %s", res.Stderr)
	}
	events := srv.Events()
	if len(events) != 12 {
		t.Fatalf("PostHog got %d events, want one per queued review (12)", len(events))
	}
	users := map[string]bool{}
	for _, e := range events {
		if e.Event != "engagement_weekly_review_sent" || e.Properties["iso_week"] != "2020-W53" ||
			e.Properties["transaction_count"] != float64(0) || e.Properties["job"] != "engagement-weekly" {
			t.Errorf("event %s %v, want engagement_weekly_review_sent for 2020-W53 with 0 transactions", e.Event, e.Properties)
		}
		users[e.DistinctID] = true
	}
	if len(users) != 12 {
		t.Errorf("the events name %d distinct users, want 12", len(users))
	}
	requests := srv.Requests()

	again := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, env, "--as-of", asOf.Add(24*time.Hour).Format(time.RFC3339), "--output", "json")
	if again.Code != 0 {
		t.Fatalf("re-run: exit %d: %s", again.Code, again.Stderr)
	}
	if n := srv.Requests() - requests; n != 0 {
		t.Errorf("the same-week re-run sent %d requests to PostHog, want none", n)
	}
}
