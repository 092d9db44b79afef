package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
)

// Migration 87 counts the user's hours in UTC (issue 61: no read of the
// profile in the bot's call). The histograms migration 85 kept in each
// user's zone are turned to UTC by the zone's offset now: a user in
// Kolkata (+05:30) who wrote at 20:10 there, hour 20, has UTC hour 14
// (whose first hour of Kolkata's clock is 20:00 again); one in São Paulo
// (-03:00) who wrote at 20:05, hour 20, has 23; one without a zone keeps
// hour 9. Messages after the migration count in UTC. Its down turns the
// histograms back to each zone, and migration 85's call counts in the zone
// again.
func TestMigration87TurnsTheHoursToUTCAndBack(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	conn := connect(t, url)
	m := migratedTo(t, url, 85)
	// The users fixture.MigrationsHoursUsers adds, each with a message:
	// at 20:10 in Kolkata, 20:05 in São Paulo, 09:30 UTC.
	const kolkata, saoPaulo, utc = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b",
		"00000000-0000-0000-0000-00000000000c"
	fixture.MigrationsHoursUsers(t, conn)
	hour := func(id string) (top, weighted int) {
		t.Helper()
		h := fixture.HoursOf(t, conn, id)
		return h.Top, h.Weighted
	}
	check := func(when string, want map[string]int) {
		t.Helper()
		for id, w := range want {
			if top, weighted := hour(id); top != w || weighted != w {
				t.Errorf("%s: user %s has hour %d and weight at %d, want %d", when, id[len(id)-1:], top, weighted, w)
			}
		}
	}
	check("at 85", map[string]int{kolkata: 20, saoPaulo: 20, utc: 9})
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	check("at 87", map[string]int{kolkata: 14, saoPaulo: 23, utc: 9})
	// A second message, a day later at the same time: the same UTC hour.
	fixture.MigrationsFire(t, conn, saoPaulo, "user_message", time.Date(2026, 11, 2, 23, 5, 0, 0, time.UTC))
	if weight := fixture.HoursOf(t, conn, saoPaulo).WeightAt23; weight < 2 {
		t.Errorf("São Paulo's UTC hour 23 weighs %v after a second message, want over 2", weight)
	}
	if err := m.UpTo(85); err != nil {
		t.Fatal(err)
	}
	check("down at 85", map[string]int{kolkata: 20, saoPaulo: 20, utc: 9})
}

// migratedTo is a migrator of the database at url, closed when the test
// ends, that has applied the migrations up to version v.
func migratedTo(t *testing.T, url string, v uint) *migrations.Migrator {
	t.Helper()
	m, err := migrations.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if err := m.UpTo(v); err != nil {
		t.Fatal(err)
	}
	return m
}
