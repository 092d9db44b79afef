package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// dstInstant is 2026-03-08T07:30:00Z: 02:30 in New York on the night its
// clocks jump from 02:00 EST to 03:00 EDT (a local time that does not exist),
// 04:30 in São Paulo.
var dstInstant = time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC)

// edgeUser is a user on one of the thresholds, with a fixed id so that
// databases can be compared.
type edgeUser struct {
	id, state                   string
	lastActivity, goodbyeSentAt time.Time // goodbyeSentAt: zero for none
	transaction                 bool      // one transaction at lastActivity
}

func edgeUsers() []edgeUser {
	const µs = time.Microsecond
	a, day := dstInstant, 24*time.Hour
	id := func(n int) string { return fmt.Sprintf("dddddddd-0000-4000-8000-%012d", n) }
	return []edgeUser{
		{id: id(1), state: "active", lastActivity: a.Add(-14 * day)},                                                 // stays active
		{id: id(2), state: "active", lastActivity: a.Add(-14*day - µs)},                                              // gets its goodbye
		{id: id(3), state: "goodbye_sent", lastActivity: a.Add(-30 * day), goodbyeSentAt: a.Add(-48 * time.Hour)},    // dormant
		{id: id(4), state: "goodbye_sent", lastActivity: a.Add(-30 * day), goodbyeSentAt: a.Add(-48*time.Hour + µs)}, // stays
		{id: id(5), state: "active", lastActivity: a.Add(-7 * day), transaction: true},                               // outside the week
		{id: id(6), state: "active", lastActivity: a.Add(-7*day + µs), transaction: true},                            // reviewed, count 1
	}
}

func insertEdgeUsers(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	edge := edgeUsers()
	users := make([]fixture.DailyUser, len(edge))
	for i, u := range edge {
		users[i] = fixture.DailyUser{ID: u.id, JID: fmt.Sprintf("5599%09d@s.whatsapp.net", i), State: u.state,
			LastActivity: u.lastActivity, GoodbyeSentAt: u.goodbyeSentAt}
	}
	fixture.DailyUsers(t, pool, users...)
	for _, u := range edge {
		if u.transaction {
			fixture.Transactions(t, pool, u.id, u.lastActivity)
		}
	}
}

// TestAsOfOffsetAndProcessTimeZoneChangeNothing runs the daily and the
// weekly binaries as of one instant on three identically seeded databases:
// once written in UTC with TZ and PGTZ set to UTC, once written with New
// York's standard offset (-05:00) on the night its clocks spring forward
// with TZ and PGTZ set to America/New_York, once written with São Paulo's
// offset with TZ and PGTZ set to America/Sao_Paulo. Keys, thresholds and
// windows are computed from the instant alone, so the three databases end
// identical (states, messages, transitions) and the summaries agree; users
// placed on the thresholds land where the contract says. The binaries run as
// processes: TZ sets a process's time zone when it starts.
func TestAsOfOffsetAndProcessTimeZoneChangeNothing(t *testing.T) {
	t.Parallel()
	daily, weekly := binary(t), cmdtest.Build(t, "./cmd/engagement-weekly")
	for _, zone := range []string{"America/New_York", "America/Sao_Paulo"} {
		if _, err := time.LoadLocation(zone); err != nil {
			t.Fatalf("the system lacks the zone %s, without which this test proves nothing: %v", zone, err)
		}
	}
	variants := []struct {
		name, asOf, zone string
	}{
		{"UTC", "2026-03-08T07:30:00Z", "UTC"},
		{"New York on the DST change", "2026-03-08T02:30:00-05:00", "America/New_York"},
		{"São Paulo", "2026-03-08T04:30:00-03:00", "America/Sao_Paulo"},
	}
	type summary struct {
		AsOf                                                      string `json:"as_of"`
		ISOWeek                                                   string `json:"iso_week"`
		Processed, Succeeded, Failed, Skipped, Queued, Duplicates int
	}
	outcomes := make([]map[string]string, len(variants))
	summaries := make([][2]summary, len(variants))
	pools := make([]*pgxpool.Pool, len(variants))
	urls := make([]string, len(variants))
	for i := range variants {
		pools[i], urls[i] = pgtest.NewPool(t) // dropped when the test ends, not the subtest
	}
	t.Run("runs", func(t *testing.T) {
		for i, v := range variants {
			t.Run(v.name, func(t *testing.T) {
				t.Parallel()
				pool, url := pools[i], urls[i]
				if _, err := seed.Generate(context.Background(), pool, seed.Options{Users: 2000, Seed: 10, AsOf: dstInstant}); err != nil {
					t.Fatal(err)
				}
				insertEdgeUsers(t, pool)
				env := cmdtest.Env("DATABASE_URL="+url, "TZ="+v.zone, "PGTZ="+v.zone)
				for j, bin := range []string{daily, weekly} {
					res := cmdtest.Run(t, bin, env, "--as-of", v.asOf, "--output", "json")
					if res.Code != 0 {
						t.Fatalf("exit %d: %s", res.Code, res.Stderr)
					}
					if err := json.Unmarshal([]byte(res.Stdout), &summaries[i][j]); err != nil {
						t.Fatalf("summary: %v", err)
					}
				}
				outcomes[i] = fixture.Outcome(t, pool)
			})
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	for i, v := range variants[1:] {
		fixture.SameOutcome(t, v.name, outcomes[0], outcomes[i+1])
		if summaries[i+1] != summaries[0] {
			t.Errorf("%s: summaries %+v, want the UTC run's %+v", v.name, summaries[i+1], summaries[0])
		}
	}
	if s := summaries[0]; s[0].AsOf != "2026-03-08T07:30:00Z" || s[1].ISOWeek != "2026-W10" {
		t.Errorf("as_of %s, iso_week %s; want 2026-03-08T07:30:00Z and 2026-W10", s[0].AsOf, s[1].ISOWeek)
	}

	pool := pools[0]
	u := edgeUsers()
	for _, c := range []struct {
		user, name, state, key string
	}{
		{u[0].id, "inactive exactly 14 days", "active", ""},
		{u[1].id, "inactive 14 days and 1 µs", "goodbye_sent", u[1].id + ":goodbye_sent:2026-03-08"},
		{u[2].id, "goodbye 48 h ago, no deadline", "dormant", ""},
		{u[3].id, "goodbye 48 h − 1 µs ago, no deadline", "goodbye_sent", ""},
		{u[4].id, "active exactly 7 days ago", "active", ""},
		{u[5].id, "active 7 days − 1 µs ago", "active", u[5].id + ":weekly_review:2026-W10"},
	} {
		if got := fixture.StateOf(t, pool, c.user).State; got != c.state {
			t.Errorf("%s: state %s, want %s", c.name, got, c.state)
		}
		msgs := fixture.MessagesOf(t, pool, c.user)
		switch {
		case c.key == "" && len(msgs) != 0:
			t.Errorf("%s: queued %+v, want nothing", c.name, msgs)
		case c.key != "" && (len(msgs) != 1 || *msgs[0].IdempotencyKey != c.key):
			t.Errorf("%s: queued %+v, want one message keyed %s", c.name, msgs, c.key)
		}
	}
}
