package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/posthogtest"
)

const posthogKey = "phc_s3cr3t_project_key"

// logLines decodes the JSON log lines on stderr and fails on a line that
// carries the PostHog key.
func logLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	if strings.Contains(stderr, posthogKey) {
		t.Errorf("stderr contains the PostHog API key: %s", stderr)
	}
	var out []map[string]any
	for _, line := range cmdtest.Lines(stderr) {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("stderr line is not JSON: %q", line)
		}
		out = append(out, entry)
	}
	return out
}

// analyticsLine returns the log line about the analytics events, if any.
func analyticsLine(lines []map[string]any) map[string]any {
	for _, l := range lines {
		if msg, _ := l["message"].(string); strings.HasPrefix(msg, "analytics events") {
			return l
		}
	}
	return nil
}

// summaryWithoutTiming decodes a JSON summary, less its duration.
func summaryWithoutTiming(t *testing.T, stdout string) map[string]any {
	t.Helper()
	var sum map[string]any
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("stdout is not one JSON summary: %v\n%s", err, stdout)
	}
	delete(sum, "duration_ms")
	return sum
}

func TestAnalyticsEventsFollowTheRun(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 25, lastWeekOfOctober)
	srv := posthogtest.NewServer(t)

	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url, "POSTHOG_API_KEY="+posthogKey, "POSTHOG_HOST="+srv.URL),
		"--as-of", asOf, "--output", "json")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	events := srv.Events()
	if len(events) != 25 {
		t.Fatalf("PostHog got %d events, want one per moved user (25)", len(events))
	}
	users := map[string]bool{}
	for _, e := range events {
		if e.Event != "engagement_state_changed" || e.Properties["trigger"] != "inactivity_14d" ||
			e.Properties["from_state"] != "active" || e.Properties["to_state"] != "goodbye_sent" {
			t.Errorf("event %s %v, want engagement_state_changed active -> goodbye_sent (inactivity_14d)", e.Event, e.Properties)
		}
		users[e.DistinctID] = true
	}
	if n := fixture.CountTransitions(t, pool, fixture.Moves{Users: keys(users)}); n != 25 {
		t.Errorf("the events name %d users with a transition, want 25 distinct ones", n)
	}
	for _, b := range srv.Batches() {
		if b.APIKey != posthogKey {
			t.Errorf("batch api_key %q, want the configured key", b.APIKey)
		}
		if strings.Contains(b.Raw, "@s.whatsapp.net") {
			t.Error("a batch contains a WhatsApp JID")
		}
	}
	line := analyticsLine(logLines(t, res.Stderr))
	if line == nil || line["level"] != "info" || line["events"] != float64(25) || line["sent"] != float64(25) {
		t.Errorf("want an info log line with 25 events sent, got %v", line)
	}
}

// A PostHog that hangs, fails or is not there changes nothing about the
// run: same exit code, same summary, and it costs at most --posthog-timeout
// (plus a second to let go).
func TestAnalyticsNeverFailTheJob(t *testing.T) {
	t.Parallel()

	// What the run reports without analytics.
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 25, lastWeekOfOctober)
	plain := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url), "--as-of", asOf, "--output", "json")
	if plain.Code != 0 {
		t.Fatalf("exit %d: %s", plain.Code, plain.Stderr)
	}
	want := summaryWithoutTiming(t, plain.Stdout)

	tests := []struct {
		name string
		mode posthogtest.Mode
		host func(*posthogtest.Server) string
	}{
		{"hanging", posthogtest.Hang, func(s *posthogtest.Server) string { return s.URL }},
		{"failing", posthogtest.Fail, func(s *posthogtest.Server) string { return s.URL }},
		{"unreachable", posthogtest.Accept, func(*posthogtest.Server) string { return "http://127.0.0.1:1" }},
		{"malformed host", posthogtest.Accept, func(*posthogtest.Server) string { return "not a url" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, url := pgtest.NewPool(t)
			fixture.InactiveUsers(t, pool, 25, lastWeekOfOctober)
			srv := posthogtest.NewServer(t)
			srv.SetMode(tt.mode)

			const budget = time.Second
			start := time.Now()
			res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url, "POSTHOG_API_KEY="+posthogKey, "POSTHOG_HOST="+tt.host(srv)),
				"--as-of", asOf, "--output", "json", "--posthog-timeout", budget.String(), "--fail-on-partial")
			took := time.Since(start)
			if res.Code != 0 {
				t.Fatalf("exit %d, want 0: %s", res.Code, res.Stderr)
			}
			got := summaryWithoutTiming(t, res.Stdout)
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("summary\n%s\nwant the same as without analytics\n%s", gotJSON, wantJSON)
			}
			// The run itself takes a fraction of a second here; the rest is
			// the analytics budget, at most a second for the client to let
			// go, and slack for a busy machine.
			if limit := budget + 2500*time.Millisecond; took > limit {
				t.Errorf("the run took %s, want under %s", took, limit)
			}
			line := analyticsLine(logLines(t, res.Stderr))
			if line == nil || line["level"] != "warn" {
				t.Errorf("want one warning about the analytics events, got %v\n%s", line, res.Stderr)
			}
			if n := len(srv.Events()); n != 0 {
				t.Errorf("PostHog kept %d events, want none", n)
			}
		})
	}
}

func TestAnalyticsAreOffByDefault(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		env  []string
		args []string
	}{
		{"no API key", nil, nil},
		{"dry run", []string{"POSTHOG_API_KEY=" + posthogKey}, []string{"--dry-run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, url := pgtest.NewPool(t)
			fixture.InactiveUsers(t, pool, 5, lastWeekOfOctober)
			srv := posthogtest.NewServer(t)
			env := append([]string{"DATABASE_URL=" + url, "POSTHOG_HOST=" + srv.URL}, tt.env...)
			res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env(env...), append([]string{"--as-of", asOf, "--output", "json"}, tt.args...)...)
			if res.Code != 0 {
				t.Fatalf("exit %d: %s", res.Code, res.Stderr)
			}
			if sum := summaryWithoutTiming(t, res.Stdout); sum["processed"] != float64(5) {
				t.Errorf("processed %v, want 5: the run must have had something to report", sum["processed"])
			}
			if n := srv.Requests(); n != 0 {
				t.Errorf("PostHog got %d requests, want none", n)
			}
			if line := analyticsLine(logLines(t, res.Stderr)); line != nil {
				t.Errorf("unexpected analytics log line %v", line)
			}
		})
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Issue 45: each goodbye's state_changed event says its arm, and its copy
// variant when the catalog has variants, as the log row does: 200 users,
// a 20 % holdout, two variants.
func TestAnalyticsEventsCarryTheArmAndVariant(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 200, lastWeekOfOctober)
	srv := posthogtest.NewServer(t)
	catalog := writeFile(t, "catalog.json", variantsCatalog)
	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url, "POSTHOG_API_KEY="+posthogKey, "POSTHOG_HOST="+srv.URL,
		"ENGAGEMENT_CATALOG="+catalog), "--as-of", asOf, "--holdout-percent", "20")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	logged := map[string][2]any{}
	for _, l := range fixture.LogRows(t, pool, fixture.Logged{}) {
		v := any(nil)
		if l.Variant != nil {
			v = *l.Variant
		}
		logged[l.UserID] = [2]any{l.Holdout, v}
	}
	held := 0
	for _, e := range srv.Events() {
		want := logged[e.DistinctID]
		if e.Properties["holdout"] != want[0] || e.Properties["variant"] != want[1] {
			t.Errorf("event of %s: holdout %v variant %v, the log says %v %v", e.DistinctID, e.Properties["holdout"], e.Properties["variant"], want[0], want[1])
		}
		if want[0] == true {
			held++
		}
	}
	if len(srv.Events()) != 200 || held == 0 {
		t.Errorf("%d events, %d held out; want 200, some held out", len(srv.Events()), held)
	}
}
