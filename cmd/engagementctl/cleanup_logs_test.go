package main_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/retention"
)

// Issue 56, finding 7: nothing aged out the console's audit log or the job
// runs (queue-process every minute: 1,440 runs a day). engagementctl
// cleanup does now, by horizons of their own (default 5 years and 90
// days), and never deletes a run still going, one a message or a logged
// transition names (until cleanup has deleted the message), or one of its
// job's latest 100 (the console's runs page).
func TestCleanupAgesOutTheAuditAndJobRuns(t *testing.T) {
	t.Parallel()
	if console.RunsPerJob > retention.KeepRuns {
		t.Fatalf("the console lists %d runs a job, cleanup keeps %d", console.RunsPerJob, 100)
	}
	pool, url := pgtest.NewPool(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	now := fixture.Now(t, pool)
	ago := func(days int) time.Time { return now.Add(-time.Duration(days) * retention.Day) }
	run := func(job, status string, started time.Time) int64 {
		t.Helper()
		var finished time.Time
		if status != "running" {
			finished = started.Add(time.Minute)
		}
		return fixture.JobRun(t, pool, job, status, started, finished)
	}
	// The daily job's latest 100 runs, yesterday; older ones below.
	for g := range 100 {
		fixture.JobRun(t, pool, "engagement-daily", "succeeded", ago(1).Add(-time.Duration(g+1)*time.Minute), ago(1))
	}
	oldDone := run("engagement-daily", "succeeded", ago(200))
	oldFailed := run("engagement-daily", "failed", ago(150))
	oldRunning := run("engagement-daily", "running", ago(200))
	namedByMessage := run("engagement-daily", "succeeded", ago(300))
	namedByLog := run("engagement-daily", "succeeded", ago(300))
	namedByOldMessage := run("engagement-daily", "succeeded", ago(300))
	young := run("engagement-daily", "partial", ago(30))
	weeklysLatest := run("engagement-weekly", "succeeded", ago(300))

	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: now})
	goodbye := fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select",
		JID: "5511900000001@s.whatsapp.net", RunID: namedByMessage}
	fixture.Queue(t, pool, goodbye)
	goodbye.RunID, goodbye.Status = namedByOldMessage, "sent"
	goodbye.SentAt, goodbye.CreatedAt, goodbye.ScheduledFor, goodbye.ReplayUntil = ago(200), ago(200), ago(200), ago(200)
	fixture.Queue(t, pool, goodbye)
	fixture.LogMove(t, pool, fixture.Move{User: user, From: "active", To: "goodbye_sent", Trigger: "inactivity_14d", RunID: namedByLog})
	for _, days := range []int{6 * 365, 4 * 365, 2} {
		fixture.Audit(t, pool, ago(days), "ana", "cancel", 1)
	}
	runs := func() []int64 { return fixture.RunIDs(t, pool, ago(2)) }
	asOf := now.Truncate(time.Second)
	audit := func() int { return fixture.CountAudit(t, pool) }
	allRuns := runs()
	type summary struct {
		JobRuns     *int64     `json:"job_runs"`
		AuditRows   *int64     `json:"audit_rows"`
		Messages    int64      `json:"messages"`
		RunsCutoff  *time.Time `json:"runs_cutoff"`
		AuditCutoff *time.Time `json:"audit_cutoff"`
	}
	cleanup := func(args ...string) summary {
		t.Helper()
		res := cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"cleanup", "--output", "json", "--as-of", asOf.Format(time.RFC3339)}, args...)...)
		var s summary
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &s) != nil || s.JobRuns == nil || s.AuditRows == nil {
			t.Fatalf("cleanup %v: exit %d, %q (%s); want a summary with job_runs and audit_rows", args, res.Code, res.Stdout, res.Stderr)
		}
		return s
	}

	for _, args := range [][]string{{"--runs-older-than", "24h"}, {"--audit-older-than", "720h"}, {"--runs-older-than", "-1h"}} {
		res := cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"cleanup"}, args...)...)
		if res.Code != 2 || !strings.Contains(res.Stderr, strings.TrimPrefix(args[0], "--")) || strings.Count(strings.TrimSpace(res.Stderr), "\n") > 0 {
			t.Errorf("cleanup %v: exit %d, %q; want 2 and one line naming the flag", args, res.Code, res.Stderr)
		}
	}
	if s := cleanup("--dry-run"); *s.JobRuns != 2 || *s.AuditRows != 1 || !slices.Equal(runs(), allRuns) || audit() != 3 {
		t.Errorf("dry run: %d runs, %d audit rows (%d runs, %d audit rows left); want 2 and 1, nothing deleted",
			*s.JobRuns, *s.AuditRows, len(runs()), audit())
	}
	s := cleanup()
	if *s.JobRuns != 3 || *s.AuditRows != 1 || s.Messages != 1 || s.RunsCutoff == nil || !s.RunsCutoff.Equal(asOf.Add(-retention.DefaultRunRetention)) {
		t.Errorf("cleanup: %d runs, %d audit rows, %d messages, runs cutoff %v; want 3, 1 and 1, cutoff 90 days back",
			*s.JobRuns, *s.AuditRows, s.Messages, s.RunsCutoff)
	}
	want := []int64{oldRunning, namedByMessage, namedByLog, young, weeklysLatest}
	if got := runs(); !slices.Equal(got, want) {
		t.Errorf("runs left %v, want %v (gone: %v)", got, want, []int64{oldDone, oldFailed, namedByOldMessage})
	}
	if n := fixture.CountRuns(t, pool, fixture.Runs{}); n != 100+len(want) {
		t.Errorf("%d runs left, want the latest 100 and %d more", n, len(want))
	}
	if n := audit(); n != 2 {
		t.Errorf("%d audit rows left, want the two younger than 5 years", n)
	}
	if s := cleanup("--runs-older-than", "0", "--audit-older-than", "0"); *s.JobRuns != 0 || *s.AuditRows != 0 || s.RunsCutoff != nil || s.AuditCutoff != nil {
		t.Errorf("horizons 0: %+v, want nothing and no cutoffs", s)
	}
}
