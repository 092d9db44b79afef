package main_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
)

func tableExists(t *testing.T, url, table string) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	return fixture.TableExists(t, conn, table)
}

func TestMigrateUpDownVersion(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	latest := "schema version " + itoa(migrations.Latest) + " of " + itoa(migrations.Latest)
	versions := migrations.Versions()
	oneBack := "schema version " + itoa(versions[len(versions)-2]) + " of " + itoa(migrations.Latest)

	steps := []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantTable  bool
	}{
		{[]string{"migrate", "version"}, 0, "schema version 0 of", false},
		{[]string{"migrate", "up"}, 0, latest, true},
		{[]string{"migrate", "up"}, 0, latest, true}, // up to date: a no-op
		{[]string{"migrate", "version"}, 0, latest, true},
		{[]string{"migrate", "down"}, 0, oneBack, true},
		{[]string{"migrate", "down", itoa(migrations.Latest)}, 0, "schema version 0 of", false}, // more than left: all of them
		{[]string{"migrate", "down"}, 0, "schema version 0 of", false},                          // nothing left: a no-op
		{[]string{"migrate", "up"}, 0, latest, true},
		{[]string{"migrate", "down", "--all"}, 2, "", true}, // drops everything: not without --yes
		{[]string{"migrate", "down", "--all", "--yes"}, 0, "schema version 0 of", false},
		{[]string{"migrate", "up"}, 0, latest, true},
	}
	for _, s := range steps {
		res := cmdtest.Exec(t, ctl.NewCommand, env, s.args...)
		if res.Code != s.wantCode || !strings.Contains(res.Stdout, s.wantStdout) {
			t.Fatalf("engagementctl %s: exit %d stdout %q stderr %q; want exit %d and %q",
				strings.Join(s.args, " "), res.Code, res.Stdout, res.Stderr, s.wantCode, s.wantStdout)
		}
		if got := tableExists(t, url, "user_engagement_states"); got != s.wantTable {
			t.Fatalf("after engagementctl %s: user_engagement_states exists = %v, want %v", strings.Join(s.args, " "), got, s.wantTable)
		}
	}
}

func TestCtlUsageErrors(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no database", nil, []string{"migrate", "up"}, "DATABASE_URL"},
		{"bad step count", []string{"DATABASE_URL=" + url}, []string{"migrate", "down", "two"}, "positive number"},
		{"unknown command", []string{"DATABASE_URL=" + url}, []string{"migrate", "sideways"}, "unknown command"},
		{"unknown flag", []string{"DATABASE_URL=" + url}, []string{"migrate", "up", "--force"}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env(tt.env...), tt.args...)
			if res.Code != 2 || !strings.Contains(res.Stderr, tt.want) || len(cmdtest.Lines(res.Stderr)) != 1 {
				t.Errorf("exit %d stderr %q; want exit 2 and one line mentioning %q", res.Code, res.Stderr, tt.want)
			}
		})
	}
	if tableExists(t, url, "user_engagement_states") {
		t.Error("a rejected command changed the schema")
	}
}

func itoa(v uint) string { return strconv.FormatUint(uint64(v), 10) }

func TestEnqueue(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	env := cmdtest.Env("DATABASE_URL=" + url)
	enqueue := func(args ...string) (cmdtest.Result, struct {
		ID      string `json:"id"`
		Created bool   `json:"created"`
	}) {
		t.Helper()
		res := cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"enqueue", "--user-id", user, "--type", "weekly_review",
			"--key", "engagement.weekly_review.celebration", "--output", "json"}, args...)...)
		var out struct {
			ID      string `json:"id"`
			Created bool   `json:"created"`
		}
		if res.Code == 0 {
			if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
				t.Fatalf("stdout %q: %v", res.Stdout, err)
			}
		}
		return res, out
	}

	res, first := enqueue("--params", `{"count":"3"}`, "--idempotency-key", " week-48 ")
	if res.Code != 0 || !first.Created || first.ID == "" {
		t.Fatalf("first enqueue: exit %d %+v %s", res.Code, first, res.Stderr)
	}
	res, again := enqueue("--params", `{"count":"9"}`, "--idempotency-key", "week-48")
	if res.Code != 0 || again.Created || again.ID != first.ID {
		t.Errorf("replay: exit %d %+v, want the same id, created false", res.Code, again)
	}
	if !strings.Contains(res.Stderr, `"level":"warn"`) || !strings.Contains(res.Stderr, "week-48") || strings.Contains(res.Stderr, `"9"`) {
		t.Errorf("replay with other params: log %q, want a warning naming the key and not the payload", res.Stderr)
	}
	if msgs := fixture.MessagesOf(t, pool, user); len(msgs) != 1 || msgs[0].Params["count"] != "3" {
		t.Errorf("queue %+v, want one message with its first params", msgs)
	}

	for _, bad := range []struct {
		name string
		args []string
		want string
	}{
		{"key too long", []string{"--idempotency-key", strings.Repeat("k", 129)}, "128"},
		{"params not JSON", []string{"--params", "count=3"}, "--params"},
		{"params with a NUL", []string{"--params", `{"count":"a\u0000b"}`}, "--params"},
		{"bad schedule", []string{"--scheduled-for", "tomorrow"}, "--scheduled-for"},
		{"bad destination", []string{"--destination", "channel"}, "--destination"},
		{"bad replay-until", []string{"--replay-until", "soon"}, "--replay-until"},
		{"bad period-start", []string{"--period-start", "W48"}, "--period-start"},
	} {
		if res, _ := enqueue(bad.args...); res.Code != 2 || !strings.Contains(res.Stderr, bad.want) {
			t.Errorf("%s: exit %d stderr %q, want 2 mentioning %q", bad.name, res.Code, res.Stderr, bad.want)
		}
	}
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "enqueue", "--user-id", "nope", "--type", "x"); res.Code != 2 {
		t.Errorf("bad user id: exit %d, want 2", res.Code)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}); n != 1 {
		t.Errorf("%d messages after the rejected calls, want still 1", n)
	}
	// The period a key covers and until when it could be produced again
	// are stored as given (cleanup and verify read them, not the key).
	res, dated := enqueue("--idempotency-key", "manual review 48", "--period-start", "2026-11-23T00:00:00Z", "--replay-until", "2026-11-30T00:00:00Z")
	if res.Code != 0 {
		t.Fatalf("enqueue with a period: exit %d %s", res.Code, res.Stderr)
	}
	if m := fixture.MessageByID(t, pool, dated.ID); m.PeriodStart == nil || !m.PeriodStart.Equal(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)) ||
		m.ReplayUntil == nil || !m.ReplayUntil.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
		t.Error("--period-start and --replay-until were not stored")
	}
	fixture.DeleteMessages(t, pool, dated.ID, nil, "")
	// No key: every call creates a message.
	_, a := enqueue()
	_, b := enqueue()
	if !a.Created || !b.Created || a.ID == b.ID {
		t.Errorf("keyless enqueues %+v %+v, want two new messages", a, b)
	}
}

func TestCleanupCommand(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for _, status := range []string{"sent", "failed", "cancelled", "pending", "processing"} {
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "reminder", Status: status,
			CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	}
	fixture.IdempotencyKey(t, pool, "idempotency:old", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	fixture.IdempotencyKey(t, pool, "idempotency:live", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	env := cmdtest.Env("DATABASE_URL=" + url)
	for _, c := range []struct {
		args []string
		want string
		left int
	}{
		{[]string{"--dry-run"}, `"messages":3,"ledger":0,"idempotency_keys":1`, 5},
		{nil, `"messages":3,"ledger":0,"idempotency_keys":1`, 2},
		{nil, `"messages":0,"ledger":0,"idempotency_keys":0`, 2},
	} {
		res := cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"cleanup", "--older-than", "720h", "--as-of", "2026-11-22T00:00:00Z", "--output", "json"}, c.args...)...)
		if res.Code != 0 || !strings.Contains(res.Stdout, c.want) {
			t.Errorf("cleanup %v: exit %d stdout %q, want %s", c.args, res.Code, res.Stdout, c.want)
		}
		if n := fixture.CountMessages(t, pool, fixture.Messages{}); n != c.left {
			t.Errorf("cleanup %v left %d messages, want %d", c.args, n, c.left)
		}
	}
	if n := fixture.CountIdempotencyKeys(t, pool); n != 1 {
		t.Errorf("%d idempotency keys left, want the live one", n)
	}
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "cleanup", "--older-than", "-1h"); res.Code != 2 {
		t.Errorf("negative retention: exit %d, want 2", res.Code)
	}
}
