package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// runCtl runs engagementctl in process against dbURL.
func runCtl(dbURL string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = cli.Main(context.Background(), NewCommand(), append([]string{"--database-url", dbURL}, args...), cli.Env{Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// Issue 17, point 3: requeue and cancel report their count as JSON (or a
// line of text), change nothing with --dry-run, and log one audit line.
func TestRequeueAndCancelCommands(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	failed := fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", Status: "failed", RetryCount: 3,
		Error: "webhook: HTTP 503", Key: "k1", ScheduledFor: time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)})
	pending := fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", Key: "k2"})
	status := func(id string) string { return fixture.MessageByID(t, pool, id).Status }

	code, out, errOut := runCtl(dbURL, "requeue", "--since", "2026-03-02T00:00:00Z", "--until", "2026-03-03T00:00:00Z",
		"--type", "goodbye", "--error-contains", "503", "--dry-run", "--output", "json")
	if code != cli.ExitOK || strings.TrimSpace(out) != `{"status":"failed","requeued":1,"dry_run":true}` {
		t.Fatalf("requeue --dry-run: exit %d, %q (%s)", code, out, errOut)
	}
	if s := status(failed); s != "failed" {
		t.Fatalf("the dry run requeued: %s", s)
	}
	code, out, errOut = runCtl(dbURL, "requeue", "--ids", failed+", "+pending, "--output", "json")
	if code != cli.ExitOK || strings.TrimSpace(out) != `{"status":"failed","requeued":1,"dry_run":false}` {
		t.Fatalf("requeue --ids: exit %d, %q (%s)", code, out, errOut)
	}
	if s := status(failed); s != "pending" {
		t.Errorf("after requeue: %s, want pending", s)
	}
	var audit map[string]any
	if err := json.Unmarshal([]byte(errOut), &audit); err != nil || audit["command"] != "requeue" || audit["messages"] != 1.0 || audit["ids"] != 2.0 {
		t.Errorf("audit line %q (%v), want one JSON line naming requeue, 1 message and 2 ids", errOut, err)
	}

	code, out, errOut = runCtl(dbURL, "cancel", "--user-id", user, "--type", "weekly_review")
	if code != cli.ExitOK || out != "cancelled 1 pending messages\n" {
		t.Fatalf("cancel: exit %d, %q (%s)", code, out, errOut)
	}
	// Issue 17, point 4: status counts cancelled messages by reason.
	if code, out, errOut := runCtl(dbURL, "status"); code != cli.ExitOK ||
		!strings.Contains(out, "cancelled by reason: opted_out 0, stale 0, no_user 0, operator 1, frequency 0, erased 0, holdout 0, us_marketing_blocked 0, reachout_window 0\n") {
		t.Errorf("status: exit %d (%s), want the operator's cancellation counted:\n%s", code, errOut, out)
	}
	code, out, errOut = runCtl(dbURL, "cancel", "--all", "--dry-run", "--output", "json")
	if code != cli.ExitOK || strings.TrimSpace(out) != `{"cancelled":1,"dry_run":true}` {
		t.Fatalf("cancel --all --dry-run: exit %d, %q (%s), want the requeued goodbye counted", code, out, errOut)
	}
	code, out, errOut = runCtl(dbURL, "requeue", "--status", "cancelled", "--reason", "operator")
	if code != cli.ExitOK || out != "requeued 1 cancelled messages\n" || status(pending) != "pending" {
		t.Fatalf("requeue the operator's cancellation: exit %d, %q (%s), status %s", code, out, errOut, status(pending))
	}
}

// Issue 17, point 3: a bad filter is exit 2 with one line naming the flag,
// and nothing changes.
func TestRepairCommandsRejectBadFilters(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", Status: "failed"})
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", Status: "pending"})
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"requeue", "--since", "yesterday"}, "--since"},
		{[]string{"requeue", "--until", "2026-03-02"}, "--until"},
		{[]string{"requeue", "--status", "sent"}, "--status"},
		{[]string{"requeue", "--status", "pending"}, "--status"},
		{[]string{"requeue", "--ids", "42"}, "--ids"},
		{[]string{"requeue", "--reason", "stale"}, "--reason"},
		{[]string{"requeue", "--status", "cancelled", "--reason", "whim"}, "--reason"},
		{[]string{"requeue", "--since", "2026-03-03T00:00:00Z", "--until", "2026-03-02T00:00:00Z"}, "--since"},
		{[]string{"requeue", "--output", "yaml"}, "--output"},
		{[]string{"cancel"}, "--all"},
		{[]string{"cancel", "--dry-run"}, "--all"},
		{[]string{"cancel", "--all", "--user-id", user}, "--all"},
		{[]string{"cancel", "--user-id", "alice"}, "--user-id"},
		{[]string{"cancel", "--ids", user + ",nope"}, "--ids"},
		{[]string{"cancel", "--key", strings.Repeat("k", 200)}, "--key"},
	} {
		code, out, errOut := runCtl(dbURL, c.args...)
		if code != cli.ExitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.flag) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %s", c.args, code, out, errOut, c.flag)
		}
	}
	for _, status := range []string{"failed", "pending"} {
		if n := fixture.CountMessages(t, pool, fixture.Messages{Status: status}); n != 1 {
			t.Errorf("%d messages %s after the rejected commands, want 1", n, status)
		}
	}
}
