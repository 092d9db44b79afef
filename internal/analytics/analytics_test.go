package analytics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/analytics"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/posthogtest"
	"github.com/engagement-scheduler/engagement/scheduler"
)

const apiKey = "phc_test_project_key"

var asOf = time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)

// users creates one user per kind of daily move, plus users the daily job
// leaves alone and users the weekly job reviews. It returns the ids by role.
func users(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	ids := map[string]string{
		"inactive": fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.AddDate(0, 0, -20)}),
		"expired": fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: asOf.AddDate(0, 0, -20),
			GoodbyeSentAt: fixture.Ptr(asOf.Add(-72 * time.Hour)), GoodbyeExpiresAt: fixture.Ptr(asOf.Add(-24 * time.Hour))}),
		"reminder": fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: asOf.AddDate(0, 0, -3),
			RemindAt: fixture.Ptr(asOf.Add(-time.Hour))}),
		"opted_out": fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.AddDate(0, 0, -20), OptedOut: true}),
		"refused":   fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.AddDate(0, 0, -20)}),
		"busy": fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.AddDate(0, 0, -2),
			Destination: "group", GroupJID: fixture.Ptr("120363000000000001@g.us")}),
		"helped": fixture.User(t, pool, fixture.UserOptions{State: "help_flow", LastActivity: asOf.AddDate(0, 0, -1)}),
	}
	fixture.Transactions(t, pool, ids["busy"], asOf.AddDate(0, 0, -6), asOf.AddDate(0, 0, -2), asOf.Add(-time.Hour))
	// This user's write fails: the run rolls it back, and nothing about it
	// may reach PostHog.
	fixture.Refuse(t, pool, "user_engagement_states", ids["refused"])
	return ids
}

func config(srv *posthogtest.Server) analytics.Config {
	return analytics.Config{APIKey: apiKey, Endpoint: srv.URL, Timeout: 10 * time.Second, Logger: zerolog.Nop()}
}

func run(t *testing.T, pool *pgxpool.Pool, job func(context.Context, *pgxpool.Pool, scheduler.Config) (*scheduler.Summary, error)) *scheduler.Summary {
	t.Helper()
	sum, err := job(context.Background(), pool, scheduler.Config{AsOf: asOf, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("run %s: %v", sum.Job, err)
	}
	if sum.RunID == 0 {
		t.Fatal("the run has no run id")
	}
	return sum
}

type transitionRow struct {
	from, to, trigger string
	createdAt         time.Time
}

func transitionsOfRun(t *testing.T, pool *pgxpool.Pool, runID int64) map[string]transitionRow {
	t.Helper()
	out := map[string]transitionRow{}
	for _, r := range fixture.LogRows(t, pool, fixture.Logged{RunID: runID}) {
		out[r.UserID] = transitionRow{from: r.FromState, to: r.ToState, trigger: r.Trigger, createdAt: r.CreatedAt}
	}
	return out
}

// checkCommon checks what every event of a run carries.
func checkCommon(t *testing.T, e posthogtest.Event, job string, runID int64, seen map[string]bool) {
	t.Helper()
	if e.Type != "capture" {
		t.Errorf("event type %q, want capture", e.Type)
	}
	if e.Properties["job"] != job {
		t.Errorf("%s for %s: job %v, want %s", e.Event, e.DistinctID, e.Properties["job"], job)
	}
	if got, ok := e.Properties["run_id"].(float64); !ok || int64(got) != runID {
		t.Errorf("%s for %s: run_id %v, want %d", e.Event, e.DistinctID, e.Properties["run_id"], runID)
	}
	if e.Properties["as_of"] != asOf.Format(time.RFC3339) {
		t.Errorf("%s for %s: as_of %v, want %s", e.Event, e.DistinctID, e.Properties["as_of"], asOf.Format(time.RFC3339))
	}
	if e.UUID == "" || seen[e.UUID] {
		t.Errorf("%s for %s: uuid %q is empty or not unique", e.Event, e.DistinctID, e.UUID)
	}
	seen[e.UUID] = true
}

func TestPublishRunSendsWhatTheRunCommitted(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ids := users(t, pool)
	srv := posthogtest.NewServer(t)
	ctx := context.Background()
	seen := map[string]bool{}

	// The daily run: one engagement_state_changed per transition row.
	daily := run(t, pool, scheduler.RunDaily)
	if daily.Failed != 1 {
		t.Fatalf("daily run failed %d users, want the refused one", daily.Failed)
	}
	want := transitionsOfRun(t, pool, daily.RunID)
	if len(want) != 3 {
		t.Fatalf("the daily run logged %d transitions, want 3 (inactive, expired, reminder)", len(want))
	}
	res, err := analytics.PublishRun(ctx, pool, daily.RunID, config(srv))
	if err != nil {
		t.Fatalf("publish the daily run: %v", err)
	}
	if res != (analytics.Result{Events: 3, Sent: 3}) {
		t.Errorf("result %+v, want 3 events, 3 sent", res)
	}
	events := srv.Events()
	if len(events) != len(want) {
		t.Fatalf("PostHog got %d events, want one per transition (%d)", len(events), len(want))
	}
	for _, e := range events {
		row, ok := want[e.DistinctID]
		if !ok {
			t.Errorf("event for %s, who has no transition in the run", e.DistinctID)
			continue
		}
		delete(want, e.DistinctID) // a second event for the user fails above
		if e.Event != analytics.EventStateChanged {
			t.Errorf("event %q, want %s", e.Event, analytics.EventStateChanged)
		}
		checkCommon(t, e, scheduler.DailyJob, daily.RunID, seen)
		if e.Properties["from_state"] != row.from || e.Properties["to_state"] != row.to || e.Properties["trigger"] != row.trigger {
			t.Errorf("event for %s: %v -> %v (%v), want %s -> %s (%s)", e.DistinctID,
				e.Properties["from_state"], e.Properties["to_state"], e.Properties["trigger"], row.from, row.to, row.trigger)
		}
		if !e.Timestamp.Equal(row.createdAt) {
			t.Errorf("event for %s at %s, want the row's created_at %s", e.DistinctID, e.Timestamp, row.createdAt)
		}
	}
	wantMoves := map[string]string{ids["inactive"]: "inactivity_14d", ids["expired"]: "goodbye_timeout", ids["reminder"]: "reminder_due"}
	for _, e := range events {
		if trig, ok := wantMoves[e.DistinctID]; !ok || e.Properties["trigger"] != trig {
			t.Errorf("event for %s with trigger %v; want only the three moved users with their triggers", e.DistinctID, e.Properties["trigger"])
		}
	}

	// The weekly run: one engagement_weekly_review_sent per queued review.
	before := len(srv.Events())
	weekly := run(t, pool, scheduler.RunWeekly)
	if weekly.Queued != 2 {
		t.Fatalf("the weekly run queued %d reviews, want 2 (busy, helped)", weekly.Queued)
	}
	res, err = analytics.PublishRun(ctx, pool, weekly.RunID, config(srv))
	if err != nil {
		t.Fatalf("publish the weekly run: %v", err)
	}
	if res != (analytics.Result{Events: 2, Sent: 2}) {
		t.Errorf("result %+v, want 2 events, 2 sent", res)
	}
	reviews := srv.Events()[before:]
	wantCount := map[string]float64{ids["busy"]: 3, ids["helped"]: 0}
	if len(reviews) != len(wantCount) {
		t.Fatalf("PostHog got %d weekly events, want %d", len(reviews), len(wantCount))
	}
	for _, e := range reviews {
		n, ok := wantCount[e.DistinctID]
		if !ok {
			t.Errorf("weekly event for %s, who got no review (or a second event)", e.DistinctID)
			continue
		}
		delete(wantCount, e.DistinctID)
		if e.Event != analytics.EventWeeklyReviewSent {
			t.Errorf("event %q, want %s", e.Event, analytics.EventWeeklyReviewSent)
		}
		checkCommon(t, e, scheduler.WeeklyJob, weekly.RunID, seen)
		if e.Properties["iso_week"] != "2026-W47" {
			t.Errorf("review for %s: iso_week %v, want 2026-W47", e.DistinctID, e.Properties["iso_week"])
		}
		if e.Properties["transaction_count"] != n {
			t.Errorf("review for %s: transaction_count %v, want %v", e.DistinctID, e.Properties["transaction_count"], n)
		}
		queued := fixture.MessageRows(t, pool, fixture.Messages{Type: "weekly_review", Users: []string{e.DistinctID}})
		if len(queued) != 1 {
			t.Fatalf("review for %s: %d reviews queued, want 1", e.DistinctID, len(queued))
		}
		createdAt := queued[0].CreatedAt
		if !e.Timestamp.Equal(createdAt) {
			t.Errorf("review for %s at %s, want the row's created_at %s", e.DistinctID, e.Timestamp, createdAt)
		}
	}

	// Every batch carries the project key, and nothing that identifies a
	// WhatsApp account.
	jids := fixture.AnalyticsJIDs(t, pool)
	if len(jids) < len(ids) {
		t.Fatalf("found %d JIDs for %d users", len(jids), len(ids))
	}
	for _, b := range srv.Batches() {
		if b.APIKey != apiKey {
			t.Errorf("batch api_key %q, want %q", b.APIKey, apiKey)
		}
		for _, jid := range jids {
			if strings.Contains(b.Raw, jid) {
				t.Errorf("a batch contains the JID %s", jid)
			}
		}
		for _, id := range []string{ids["opted_out"], ids["refused"]} {
			if strings.Contains(b.Raw, id) {
				t.Errorf("a batch mentions user %s, whom no run changed", id)
			}
		}
	}
	if p := srv.Problems(); len(p) > 0 {
		t.Errorf("PostHog got requests it could not decode: %v", p)
	}
}

func TestSameDayRerunSendsNothing(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	users(t, pool)
	srv := posthogtest.NewServer(t)
	ctx := context.Background()

	for _, job := range []func(context.Context, *pgxpool.Pool, scheduler.Config) (*scheduler.Summary, error){scheduler.RunDaily, scheduler.RunWeekly} {
		first := run(t, pool, job)
		res, err := analytics.PublishRun(ctx, pool, first.RunID, config(srv))
		if err != nil || res.Sent == 0 {
			t.Fatalf("%s: first run published %+v, %v; want events sent", first.Job, res, err)
		}
		requests := srv.Requests()

		again := run(t, pool, job)
		if again.RunID == first.RunID {
			t.Fatalf("%s: the re-run reused run id %d", again.Job, again.RunID)
		}
		res, err = analytics.PublishRun(ctx, pool, again.RunID, config(srv))
		if err != nil {
			t.Errorf("%s: publish the re-run: %v", again.Job, err)
		}
		if res != (analytics.Result{}) {
			t.Errorf("%s: the re-run published %+v, want nothing", again.Job, res)
		}
		if got := srv.Requests(); got != requests {
			t.Errorf("%s: PostHog got %d requests after the re-run, want none", again.Job, got-requests)
		}
	}
}

func TestPublishRunStaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 600, asOf.AddDate(0, 0, -20)) // three batches of events
	sum := run(t, pool, scheduler.RunDaily)

	tests := []struct {
		name  string
		setup func(*posthogtest.Server)
		url   func(*posthogtest.Server) string
	}{
		{"hangs", func(s *posthogtest.Server) { s.SetMode(posthogtest.Hang) }, func(s *posthogtest.Server) string { return s.URL }},
		{"fails", func(s *posthogtest.Server) { s.SetMode(posthogtest.Fail) }, func(s *posthogtest.Server) string { return s.URL }},
		{"unreachable", func(*posthogtest.Server) {}, func(*posthogtest.Server) string { return "http://127.0.0.1:1" }}, // nothing listens on port 1
	}
	const budget = 700 * time.Millisecond
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := posthogtest.NewServer(t)
			tt.setup(srv)
			cfg := config(srv)
			cfg.Endpoint = tt.url(srv)
			cfg.Timeout = budget
			start := time.Now()
			res, err := analytics.PublishRun(context.Background(), pool, sum.RunID, cfg)
			took := time.Since(start)
			if limit := budget + 1500*time.Millisecond; took > limit {
				t.Errorf("PublishRun took %s, want at most %s", took, limit)
			}
			if err == nil {
				t.Error("PublishRun reported no error, though nothing was sent")
			} else if strings.Contains(err.Error(), apiKey) {
				t.Errorf("the error contains the API key: %v", err)
			}
			// Every event read fails. On a busy machine the budget may run
			// out while the run's rows are still being read: then fewer
			// were handed over, and the error says it was out of time.
			switch {
			case res.Sent != 0 || res.Failed != res.Events || res.Events > 600 || res.Events == 0:
				t.Errorf("result %+v, want up to 600 events, none sent, every one failed", res)
			case res.Events < 600 && (err == nil || !strings.Contains(err.Error(), "out of time")):
				t.Errorf("result %+v with %v: fewer than the run's 600 events, but not for want of time", res, err)
			}
		})
	}
}

func TestPublishRunRetriesATransientFailure(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 10, asOf.AddDate(0, 0, -20))
	sum := run(t, pool, scheduler.RunDaily)
	srv := posthogtest.NewServer(t)
	srv.FailFirst(1)

	res, err := analytics.PublishRun(context.Background(), pool, sum.RunID, config(srv))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	if res != (analytics.Result{Events: 10, Sent: 10}) {
		t.Errorf("result %+v, want 10 events, all sent after the retry", res)
	}
	if n := len(srv.Events()); n != 10 {
		t.Errorf("PostHog kept %d events, want 10", n)
	}
	if n := srv.Requests(); n < 2 {
		t.Errorf("PostHog got %d requests, want the failed one and its retry", n)
	}
}

func TestPublishRunWithoutAnAPIKeySendsNothing(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 3, asOf.AddDate(0, 0, -20))
	sum := run(t, pool, scheduler.RunDaily)
	srv := posthogtest.NewServer(t)
	cfg := config(srv)
	cfg.APIKey = ""

	if _, err := analytics.PublishRun(context.Background(), pool, sum.RunID, cfg); err == nil {
		t.Error("PublishRun without an API key reported no error")
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("PostHog got %d requests, want none", n)
	}
}
