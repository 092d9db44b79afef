package scheduler

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// sendRouteCallers are the statements that read a user's profile: each
// through engagement_send_route (migration 88), the one place the profile,
// its route and its skip reason are spelled out (issue 60).
var sendRouteCallers = []string{"daily_goodbye_timeout", "daily_inactivity_14d", "daily_timer", "weekly_review"}

// sqlComments are a statement file's "--" comments, which may name what
// the statement no longer spells out.
var sqlComments = regexp.MustCompile(`--[^\n]*`)

// TestTheSendRouteIsWrittenOnce: no statement of the jobs reads
// user_profiles, opt-out or routing for itself; those that need a user's
// profile call engagement_send_route.
func TestTheSendRouteIsWrittenOnce(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(os.DirFS("queries"), "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("queries/*.sql: %v, %v", files, err)
	}
	calls := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("queries", f))
		if err != nil {
			t.Fatal(err)
		}
		sql := sqlComments.ReplaceAllString(string(b), "")
		for _, spelled := range []string{"user_profiles", "reengagement_opt_out", "engagement_route("} {
			if strings.Contains(sql, spelled) {
				t.Errorf("queries/%s spells out %s: call engagement_send_route(user_id) instead", f, spelled)
			}
		}
		calls[strings.TrimSuffix(f, ".sql")] = strings.Contains(sql, "CROSS JOIN LATERAL engagement_send_route(s.user_id) p") ||
			strings.Contains(sql, "FROM engagement_send_route(s.user_id) p")
	}
	for _, name := range sendRouteCallers {
		if !calls[name] {
			t.Errorf("queries/%s.sql does not read the profile through engagement_send_route(s.user_id) p", name)
		}
	}
}

// TestTheSendRouteIsInlined: engagement_send_route costs what the
// spelled-out block cost. On a seeded and analyzed database, every daily
// step's statement and the weekly review's, as a move and as a dry run,
// plan with the function inlined (no Function Scan: a call per user would
// be one) and the profile read by one primary-key probe per user, never
// hashed whole.
func TestTheSendRouteIsInlined(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	asOf := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	if _, err := seed.Generate(ctx, pool, seed.Options{Users: 5000, Seed: 1, AsOf: asOf}); err != nil {
		t.Fatal(err)
	}
	fixture.Analyze(t, pool)
	steps, err := dailySteps(asOf, Config{SendReminder: true})
	if err != nil {
		t.Fatal(err)
	}
	steps = append(steps, weeklyReviewStep(asOf))
	explainSteps(t, pool, "COSTS OFF", steps, func(name, kind, plan string) {
		// With -v, the plans, to compare two trees' (docs/development.md,
		// "Shape four, measured").
		t.Logf("the %s of step %s:\n%s", kind, name, plan)
		if strings.Contains(plan, "Function Scan") {
			t.Errorf("the %s of step %s calls a set-returning function per row: engagement_send_route was not inlined\n%s", kind, name, plan)
		}
		if !strings.Contains(plan, "Index Scan using user_profiles_pkey on user_profiles") ||
			strings.Contains(plan, "Seq Scan on user_profiles") {
			t.Errorf("the %s of step %s does not probe each user's profile by its key\n%s", kind, name, plan)
		}
	})
}
