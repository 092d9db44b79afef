package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
)

// Migration 17 backfills period_start and replay_until of the messages
// queued before it from their keys (the one place a key is parsed), leaves
// keys it cannot read NULL instead of failing, and its down migration drops
// the columns.
func TestMessagePeriodsBackfillFromKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
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
		t.Fatalf("migrate down to 16: %v", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	utc := func(s string) *time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &tm
	}
	const u = "4b1f0a60-0000-4000-8000-000000000001"
	tests := []struct {
		key                string
		period, replayUtil *time.Time
	}{
		{u + ":goodbye_sent:2026-11-26", utc("2026-11-26T00:00:00Z"), utc("2026-11-27T00:00:00Z")},
		{u + ":goodbye_sent:2024-02-29", utc("2024-02-29T00:00:00Z"), utc("2024-03-01T00:00:00Z")},
		{u + ":weekly_review:2026-W48", utc("2026-11-23T00:00:00Z"), utc("2026-11-30T00:00:00Z")},
		{u + ":weekly_review:2026-W53", utc("2026-12-28T00:00:00Z"), utc("2027-01-04T00:00:00Z")},
		{u + ":weekly_review:2026-W01", utc("2025-12-29T00:00:00Z"), utc("2026-01-05T00:00:00Z")},
		{u + ":reminder:1795000000123", nil, ptr(time.UnixMilli(1795000000123))},
		{"ops-fix:goodbye_sent:2026-02-30", nil, nil},
		{"ops-fix:goodbye_sent:0000-01-01", nil, nil},
		{"ops-fix:weekly_review:2026-W54", nil, nil},
		{"ops-fix:weekly_review:2025-W53", nil, nil},
		{"ops-fix:reminder:99999999999999999999", nil, nil},
		{"anything else", nil, nil},
	}
	keys := make([]string, len(tests))
	for i, tt := range tests {
		keys[i] = tt.key
	}
	fixture.MigrationsKeyedGoodbyes(t, conn, u, keys...)
	if err := m.Up(); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	periods := fixture.MigrationsPeriods(t, conn, keys...)
	for _, tt := range tests {
		p, ok := periods[tt.key]
		if !ok {
			t.Fatalf("%s: no message under the key", tt.key)
		}
		period, until := p.Start, p.ReplayUntil
		if !sameTime(period, tt.period) || !sameTime(until, tt.replayUtil) {
			t.Errorf("%s: period_start %v, replay_until %v; want %v, %v", tt.key, period, until, tt.period, tt.replayUtil)
		}
	}
	if err := m.Down(steps); err != nil {
		t.Fatalf("migrate down again: %v", err)
	}
	if cols := fixture.Columns(t, conn, "engagement_message_queue", "period_start", "replay_until"); cols != 0 {
		t.Errorf("%d of the new columns left after the down migration, want 0", cols)
	}
}

func ptr(t time.Time) *time.Time { return &t }

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
