package main_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/verify"
)

// seededAsOf is a Monday morning, ISO week 2026-W10.
var seededAsOf = time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)

// seededDatabase seeds users and runs the daily and weekly jobs as of
// seededAsOf, so the queue, the transition log and the run history hold
// what the jobs really write.
func seededDatabase(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	pool, url := pgtest.NewPool(t)
	if _, err := seed.Generate(ctx, pool, seed.Options{Users: 1500, Seed: 11, AsOf: seededAsOf}); err != nil {
		t.Fatal(err)
	}
	for _, run := range []func(context.Context, *pgxpool.Pool, scheduler.Config) (*scheduler.Summary, error){scheduler.RunDaily, scheduler.RunWeekly} {
		if _, err := run(ctx, pool, scheduler.Config{AsOf: seededAsOf}); err != nil {
			t.Fatal(err)
		}
	}
	return pool, url
}

func TestStatusCommand(t *testing.T) {
	t.Parallel()
	pool, url := seededDatabase(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	asOf := seededAsOf.Add(time.Hour).Format(time.RFC3339)

	res := cmdtest.Exec(t, ctl.NewCommand, env, "status", "--as-of", asOf)
	if res.Code != 0 {
		t.Fatalf("status: exit %d, stderr %q", res.Code, res.Stderr)
	}
	for _, want := range []string{
		"engagement status as of 2026-03-02T07:00:00Z",
		"type  pending  processing  sent  failed  cancelled  total",
		"state  users  opted_out",
		"id  job  shard  as_of  started  took  status  processed  succeeded  failed  skipped  queued  duplicates  sent/retried/failed",
		"due now: ", "the oldest waits since 2026-03-02T06:00:00Z (1h0m0s)",
		"engagement-daily", "engagement-weekly", "succeeded",
	} {
		if !strings.Contains(squeeze(res.Stdout), want) {
			t.Errorf("status output lacks %q:\n%s", want, res.Stdout)
		}
	}
	// No JID or message text ever: the seed's JIDs end like this.
	if strings.Contains(res.Stdout, "@s.whatsapp.net") || strings.Contains(res.Stdout, "@g.us") {
		t.Errorf("status output shows a JID:\n%s", res.Stdout)
	}

	res = cmdtest.Exec(t, ctl.NewCommand, env, "status", "--as-of", asOf, "--output", "json", "--runs", "1")
	if res.Code != 0 {
		t.Fatalf("status --output json: exit %d, stderr %q", res.Code, res.Stderr)
	}
	var st struct {
		AsOf  time.Time `json:"as_of"`
		Queue struct {
			Total  int64 `json:"total"`
			Counts []struct {
				Status      string `json:"status"`
				MessageType string `json:"message_type"`
				Messages    int64  `json:"messages"`
			} `json:"counts"`
			DuePending    int64  `json:"due_pending"`
			OldestAge     *int64 `json:"oldest_due_pending_age_seconds"`
			ExpiredClaims *int64 `json:"expired_claims"`
		} `json:"queue"`
		Users struct {
			Total   int64 `json:"total"`
			ByState []struct {
				State string `json:"state"`
				Users int64  `json:"users"`
			} `json:"by_state"`
		} `json:"users"`
		Runs []struct {
			Job      string         `json:"job"`
			Status   string         `json:"status"`
			Counters map[string]any `json:"counters"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil || len(cmdtest.Lines(res.Stdout)) != 1 {
		t.Fatalf("status --output json: %v; want exactly one JSON object, got %q", err, res.Stdout)
	}
	pending := fixture.CountMessages(t, pool, fixture.Messages{Status: "pending"})
	users := fixture.CountStates(t, pool, fixture.States{})
	if st.Queue.Total != int64(pending) || st.Queue.DuePending != int64(pending) || st.Queue.OldestAge == nil || *st.Queue.OldestAge != 3600 ||
		st.Queue.ExpiredClaims == nil || *st.Queue.ExpiredClaims != 0 || len(st.Queue.Counts) != 2 {
		t.Errorf("queue %+v, want %d pending messages, all due, the oldest 3600 s old, 0 expired claims, goodbyes and reviews", st.Queue, pending)
	}
	if st.Users.Total != int64(users) || len(st.Users.ByState) != 5 {
		t.Errorf("users %+v, want %d in 5 states", st.Users, users)
	}
	if len(st.Runs) != 2 || st.Runs[0].Job != scheduler.DailyJob || st.Runs[1].Job != scheduler.WeeklyJob ||
		st.Runs[0].Status != "succeeded" || st.Runs[0].Counters["queued"] == nil {
		t.Errorf("runs %+v, want one succeeded run of each job with its counters", st.Runs)
	}
}

// squeeze trims each line and collapses runs of two or more spaces to two,
// so table rows compare whatever the column widths.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = columnGap.ReplaceAllString(strings.TrimSpace(l), "  ")
	}
	return strings.Join(lines, "\n")
}

var columnGap = regexp.MustCompile(` {2,}`)

type verifyReport struct {
	OK     bool     `json:"ok"`
	Broken []string `json:"broken"`
	Checks []struct {
		Name       string   `json:"name"`
		OK         bool     `json:"ok"`
		Violations int64    `json:"violations"`
		Examples   []string `json:"examples"`
	} `json:"checks"`
}

func TestVerifyCommand(t *testing.T) {
	t.Parallel()
	pool, url := seededDatabase(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	asOf := seededAsOf.Add(time.Hour).Format(time.RFC3339)

	// Clean: exit 0, every check ok.
	res := cmdtest.Exec(t, ctl.NewCommand, env, "verify", "--as-of", asOf)
	if res.Code != 0 || !strings.Contains(res.Stdout, "all invariants hold") || strings.Contains(res.Stdout, "FAILED") {
		t.Fatalf("verify on the seeded database: exit %d, stdout %q, stderr %q; want 0 and all invariants hold", res.Code, res.Stdout, res.Stderr)
	}
	res = cmdtest.Exec(t, ctl.NewCommand, env, "verify", "--as-of", asOf, "--output", "json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil || res.Code != 0 || !rep.OK || len(rep.Checks) != 13 || len(rep.Broken) != 0 {
		t.Fatalf("verify --output json: exit %d, %v, report %+v; want ok with 13 checks (no_goodbye_to_holdout the 13th)", res.Code, err, rep)
	}

	// Broken: a claim past its deadline and a transition the table forbids.
	claimed := fixture.SetMessages(t, pool, fixture.MessageChange{ID: fixture.MessageIDs(t, pool, fixture.Messages{Status: "pending"}, 1)[0],
		SetStatus: "processing", ClaimedUntil: seededAsOf})
	if claimed != 1 {
		t.Fatalf("claimed %d messages, want 1", claimed)
	}
	fixture.LogMove(t, pool, fixture.Move{User: fixture.FirstUser(t, pool, fixture.Pick{State: "goodbye_sent", Moved: true}),
		From: "dormant", To: "goodbye_sent", Trigger: "inactivity_14d"})

	res = cmdtest.Exec(t, ctl.NewCommand, env, "verify", "--as-of", asOf, "--output", "json")
	rep = verifyReport{}
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil || len(cmdtest.Lines(res.Stdout)) != 1 {
		t.Fatalf("verify --output json on a broken database: %v; want one JSON object, got %q", err, res.Stdout)
	}
	wantBroken := []string{verify.CheckNoExpiredClaims, verify.CheckTransitionsAllowed}
	if res.Code != 4 || rep.OK || !slices.Equal(rep.Broken, wantBroken) {
		t.Fatalf("verify on a broken database: exit %d, broken %v; want exit 4 and %v (stderr %q)", res.Code, rep.Broken, wantBroken, res.Stderr)
	}
	for _, c := range rep.Checks {
		if slices.Contains(wantBroken, c.Name) == c.OK || (!c.OK && (c.Violations != 1 || len(c.Examples) != 1)) {
			t.Errorf("check %+v: want broken with one example exactly for %v", c, wantBroken)
		}
	}
	stderr := cmdtest.Lines(res.Stderr)
	if len(stderr) != 1 || !strings.Contains(stderr[0], "2 of 13 invariants broken: no_expired_claims, transitions_allowed") {
		t.Errorf("stderr %q, want one line naming the broken invariants", res.Stderr)
	}

	res = cmdtest.Exec(t, ctl.NewCommand, env, "verify", "--as-of", asOf)
	if res.Code != 4 || !strings.Contains(res.Stdout, "no_expired_claims     FAILED (1)") ||
		!strings.Contains(res.Stdout, "transitions_allowed   FAILED (1)") || !strings.Contains(res.Stdout, "goodbye_queued        ok") ||
		!strings.Contains(res.Stdout, "2 of 13 invariants broken") {
		t.Errorf("verify text on a broken database: exit %d, stdout:\n%s", res.Code, res.Stdout)
	}
}

// Exit 1 means verify could not check; 2 a usage error before any work.
func TestVerifyCouldNotCheck(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	tests := []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		want     string
	}{
		{"no schema", []string{"DATABASE_URL=" + url}, []string{"verify"}, 1, "migrate up"},
		{"no schema, status", []string{"DATABASE_URL=" + url}, []string{"status"}, 1, "migrate up"},
		{"no database", nil, []string{"verify"}, 2, "DATABASE_URL"},
		{"bad output", []string{"DATABASE_URL=" + url}, []string{"verify", "--output", "yaml"}, 2, "--output"},
		{"bad as-of", []string{"DATABASE_URL=" + url}, []string{"status", "--as-of", "yesterday"}, 2, "--as-of"},
		{"bad runs", []string{"DATABASE_URL=" + url}, []string{"status", "--runs", "0"}, 2, "--runs"},
		{"bad retention", []string{"DATABASE_URL=" + url}, []string{"verify", "--retention", "0s"}, 2, "--retention"},
	}
	for _, tt := range tests {
		res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env(tt.env...), tt.args...)
		if res.Code != tt.wantCode || !strings.Contains(res.Stderr, tt.want) || res.Stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stderr mentioning %q", tt.name, res.Code, res.Stdout, res.Stderr, tt.wantCode, tt.want)
		}
	}
}
