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
)

// Issue 24, point 3 (the story's T9): a duplicate a job skipped was only a
// count. With debug logs, each is a line naming its key and when, and by
// which run, its message was first queued; at info there is none.
func TestEachDuplicateIsADebugLineWithItsFirstQueuedTime(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	asOf := time.Date(2021, 1, 1, 9, 0, 0, 0, time.UTC)
	fixture.InactiveUsers(t, pool, 3, asOf.Add(-time.Hour)) // active an hour ago
	env := cmdtest.Env("DATABASE_URL=" + url)
	args := []string{"--as-of", asOf.Format(time.RFC3339), "--output", "json"}

	if res := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, env, args...); res.Code != 0 {
		t.Fatalf("first run: exit %d: %s", res.Code, res.Stderr)
	}
	if res := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, env, args...); res.Code != 0 || strings.Contains(res.Stderr, "duplicate skipped") {
		t.Fatalf("second run at info: exit %d, stderr %s; want no duplicate lines", res.Code, res.Stderr)
	}
	res := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, env, append(args, "--log-level", "debug")...)
	if res.Code != 0 {
		t.Fatalf("third run: exit %d: %s", res.Code, res.Stderr)
	}
	var keys []string
	for _, line := range cmdtest.Lines(res.Stderr) {
		var l struct {
			Message        string    `json:"message"`
			Step           string    `json:"step"`
			IdempotencyKey string    `json:"idempotency_key"`
			MessageType    string    `json:"message_type"`
			FirstQueuedAt  time.Time `json:"first_queued_at"`
			FirstRunID     int64     `json:"first_run_id"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Message != "duplicate skipped: already queued" {
			continue
		}
		keys = append(keys, l.IdempotencyKey)
		if l.Step != "weekly_review" || l.MessageType != "weekly_review" || l.FirstRunID != 1 || l.FirstQueuedAt.IsZero() ||
			!strings.HasSuffix(l.IdempotencyKey, ":weekly_review:2020-W53") {
			t.Errorf("duplicate line %s, want the step, the key, first_run_id 1 and first_queued_at", line)
		}
	}
	if len(keys) != 3 {
		t.Errorf("%d duplicate lines, want one per user (3): %s", len(keys), res.Stderr)
	}
}
