package retention_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
	"github.com/engagement-scheduler/engagement/retention"
	"github.com/engagement-scheduler/engagement/sender"
)

// Issue 16, point 3: one key shaped like a goodbye key with an impossible
// date (ops-fix:goodbye_sent:2026-02-30) made every cleanup fail with
// "date/time field value out of range", so cleanup exited 1 forever. A key
// cleanup cannot parse is treated like any other key: it ages from when its
// message was queued.
//
// Since issue 18 cleanup reads no key: migration 17 backfills the rows
// queued before it from their keys, the one place a key is parsed. The rows
// go in at version 16 and are migrated, so the backfill must neither fail on
// these keys nor change what cleanup keeps.
func TestCleanupAgesUnparsableKeysFromTheirQueueTime(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	ctx := context.Background()
	m, err := migrations.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	steps := 0 // the migrations after 16
	for _, v := range migrations.Versions() {
		if v > 16 {
			steps++
		}
	}
	if err := m.Down(steps); err != nil {
		t.Fatalf("migrate down to version 16: %v", err)
	}
	asOf := time.Date(2026, 6, 1, 6, 0, 0, 0, time.UTC)
	old := asOf.Add(-60 * 24 * time.Hour)   // queued before the 30-day cutoff
	young := asOf.Add(-10 * 24 * time.Hour) // queued inside the window

	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: old})
	// Unparsable keys that look like the jobs' keys, queued long ago: deleted.
	oldKeys := []string{
		"ops-fix:goodbye_sent:2026-02-30", // no February 30th
		"ops-fix:goodbye_sent:2026-13-01", // no month 13
		"ops-fix:goodbye_sent:2026-00-10", // no month 0
		"ops-fix:goodbye_sent:0000-01-01", // no year 0
		"ops-fix:goodbye_sent:2025-02-29", // 2025 is not a leap year
		"ops-fix:weekly_review:2026-W54",  // no week 54
		"ops-fix:weekly_review:2026-W00",  // no week 0
		"ops-fix:weekly_review:2025-W53",  // 2025 has 52 ISO weeks
	}
	fixture.RetentionSentGoodbyes(t, pool, user, old, oldKeys...)
	// The same kind of keys queued inside the window: kept.
	fixture.RetentionSentGoodbyes(t, pool, user, young, "ops-fix-2:goodbye_sent:2026-02-30", "ops-fix-2:weekly_review:2026-W54")
	// Valid keys keep their rules: a real leap day long past is deleted; a
	// goodbye of a day inside the window is kept even though queued long ago.
	fixture.RetentionSentGoodbyes(t, pool, user, old, "ops-fix:goodbye_sent:2024-02-29", "ops-fix:goodbye_sent:2026-05-20",
		"ops-fix:weekly_review:2026-W53") // 2026 has 53 ISO weeks; its last ended 2027-01-04, after the cutoff

	if err := m.Up(); err != nil {
		t.Fatalf("migrate up over unparsable keys: %v", err)
	}

	cfg := retention.CleanupConfig{OlderThan: 30 * 24 * time.Hour, AsOf: asOf, DryRun: true}
	dry, err := retention.Cleanup(ctx, pool, cfg)
	if err != nil {
		t.Fatalf("cleanup --dry-run with unparsable keys: %v", err)
	}
	cfg.DryRun = false
	sum, err := retention.Cleanup(ctx, pool, cfg)
	if err != nil {
		t.Fatalf("cleanup with unparsable keys: %v", err)
	}
	wantDeleted := int64(len(oldKeys) + 1) // the unparsable old keys and the 2024 leap day
	if sum.Messages != wantDeleted || dry.Messages != wantDeleted {
		t.Errorf("cleanup deleted %d (dry run counted %d), want %d: every unparsable key queued before the cutoff and the old leap day",
			sum.Messages, dry.Messages, wantDeleted)
	}
	var left []string
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{}) {
		if m.IdempotencyKey == nil {
			t.Fatalf("message %s left without its key", m.ID)
		}
		left = append(left, *m.IdempotencyKey)
	}
	slices.Sort(left) // the keys' order
	want := []string{"ops-fix-2:goodbye_sent:2026-02-30", "ops-fix-2:weekly_review:2026-W54",
		"ops-fix:goodbye_sent:2026-05-20", "ops-fix:weekly_review:2026-W53"}
	if len(left) != len(want) {
		t.Fatalf("left %q, want %q", left, want)
	}
	for i := range want {
		if left[i] != want[i] {
			t.Fatalf("left %q, want %q", left, want)
		}
	}
}

// Issue 18, item 2: cleanup keeps a message until its replay_until, set when
// it was queued, whatever its key says: a key of no known shape is kept by
// its column, and a key that looks like a goodbye of a recent day but was
// queued without one ages from its queue time.
func TestCleanupReadsReplayUntilNotTheKey(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	asOf := time.Date(2026, 6, 1, 6, 0, 0, 0, time.UTC)
	old := asOf.Add(-60 * 24 * time.Hour) // queued before the 30-day cutoff
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: old})

	recentDay := time.Date(2026, 5, 20, 9, 0, 0, 0, time.UTC) // inside the window
	dayStart, dayEnd := fixture.Goodbye.Period.Bounds(recentDay)
	weekStart, weekEnd := fixture.WeeklyReview.Period.Bounds(recentDay)
	queue := func(key string, start, until time.Time) {
		t.Helper()
		q, err := sender.Enqueue(ctx, pool, sender.Message{
			UserID: user, Type: fixture.Goodbye.Type(), DestinationJID: "5511999990000@s.whatsapp.net",
			IdempotencyKey: key, PeriodStart: start, ReplayUntil: until,
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := fixture.SetMessages(t, pool, fixture.MessageChange{ID: q.ID, SetStatus: "sent", CreatedAt: old}); n != 1 {
			t.Fatalf("dated %d messages %s, want 1", n, q.ID)
		}
	}
	queue("goodbye for ops ticket 1234", dayStart, dayEnd)           // kept: replay_until inside the window
	queue("review/2026/21 (manual)", weekStart, weekEnd)             // kept likewise
	queue("ops-fix:goodbye_sent:2026-02-30", dayStart, dayEnd)       // kept: the column, not the impossible date
	queue(user+":goodbye_sent:2026-05-20", time.Time{}, time.Time{}) // deleted: no column, queued long ago
	queue(user+":goodbye_sent:2026-01-02", dayStart, dayEnd)         // kept: the column says a recent day

	sum, err := retention.Cleanup(ctx, pool, retention.CleanupConfig{OlderThan: 30 * 24 * time.Hour, AsOf: asOf})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 1 {
		t.Errorf("cleanup deleted %d messages, want 1: the one queued without replay_until", sum.Messages)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Key: user + ":goodbye_sent:2026-05-20"}); n != 0 {
		t.Error("the message without replay_until was kept: cleanup read its key")
	}
	if n := fixture.CountWhere(fixture.MessageRows(t, pool, fixture.Messages{}),
		func(m fixture.MessageRow) bool { return m.ReplayUntil != nil }); n != 4 {
		t.Errorf("%d messages with replay_until inside the window left, want 4", n)
	}
}

// TestCleanupAgesTheBotsRequestKeys: engagement_fire's request keys are
// kept as long as the messages, then deleted (a dry run counts them).
func TestCleanupAgesTheBotsRequestKeys(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	now := time.Now()
	fixture.RetentionFireRequests(t, pool, "old-", 7, now.Add(-31*24*time.Hour))
	fixture.RetentionFireRequests(t, pool, "new-", 3, now.Add(-29*24*time.Hour))
	cfg := retention.CleanupConfig{OlderThan: retention.DefaultRetention, AsOf: now, BatchSize: 2, DryRun: true}
	dry, err := retention.Cleanup(ctx, pool, cfg)
	if err != nil || dry.FireRequests != 7 {
		t.Fatalf("dry run: %+v, %v; want 7 request keys counted", dry, err)
	}
	cfg.DryRun = false
	sum, err := retention.Cleanup(ctx, pool, cfg)
	if err != nil || sum.FireRequests != 7 {
		t.Fatalf("cleanup: %+v, %v; want 7 request keys deleted", sum, err)
	}
	newKeys := 0
	for key := range fixture.FireRequests(t, pool) {
		if strings.HasPrefix(key, "new-") {
			newKeys++
		}
	}
	if n := newKeys; n != 3 {
		t.Errorf("%d of the 3 recent request keys are left", n)
	}
}

// Receipts kept for a send that never came (the bot's own conversation,
// which it reports too) go after a week; younger ones stay for their send.
func TestCleanupDropsReceiptsKeptAWeek(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	now := time.Now()
	fixture.RetentionKeptReceipts(t, pool, "old-", 5, "delivered", now.Add(-retention.KeptReceiptRetention-time.Hour))
	fixture.RetentionKeptReceipts(t, pool, "new-", 3, "read", now.Add(-retention.KeptReceiptRetention+time.Hour))
	cfg := retention.CleanupConfig{OlderThan: retention.DefaultRetention, AsOf: now, BatchSize: 2, DryRun: true}
	if dry, err := retention.Cleanup(ctx, pool, cfg); err != nil || dry.KeptReceipts != 5 {
		t.Fatalf("dry run: %+v, %v; want 5 kept receipts counted", dry, err)
	}
	cfg.DryRun = false
	if sum, err := retention.Cleanup(ctx, pool, cfg); err != nil || sum.KeptReceipts != 5 {
		t.Fatalf("cleanup: %+v, %v; want 5 kept receipts deleted", sum, err)
	}
	if n := fixture.KeptReceipts(t, pool, "", "new-"); n != 3 {
		t.Errorf("%d of the 3 receipts kept less than a week are left", n)
	}
}
