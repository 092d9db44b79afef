package activity_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// hours is what engagement_fire keeps of a user's messages (migration 85;
// by UTC hour since migration 87).
type hours struct {
	Hours  []float32
	Ref    *time.Time
	Hour   *int
	Recent []time.Time
}

func readHours(t *testing.T, db pgx.Tx, id string) hours {
	t.Helper()
	rows := fixture.StateRows(t, db, id)
	if len(rows) != 1 {
		t.Fatalf("%d state rows of %s, want 1", len(rows), id)
	}
	s := rows[0]
	h := hours{Hours: []float32{}, Ref: s.MessageHoursAt, Hour: s.MessageHour, Recent: []time.Time{}}
	for _, w := range s.MessageHours {
		h.Hours = append(h.Hours, float32(w))
	}
	h.Recent = append(h.Recent, s.RecentMessages...)
	return h
}

// Issue 61: every user_message counts in the hour of day it was written,
// in UTC whatever the user's zone (migration 87: Asia/Kolkata's 20:10 is
// 14:40 UTC and counts at 14; the daily job turns it back), weighted 2^(age/30 days) against the first
// message so that a message 30 days newer weighs twice as much; a late
// call counts with its own, smaller, weight and takes its place among the
// three newest; a retried call (its request key) counts nothing again;
// the other moves count nothing; a user with no usable zone counts in UTC
// too;
// a message 400 days after the reference scales the histogram down and
// moves the reference (no weight ever overflows a real).
func TestFireKeepsTheHoursTheUserWrites(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2025, 6, 1, 20, 10, 0, 0, kolkata)
	id := fixture.User(t, tx, fixture.UserOptions{LastActivity: first.Add(-time.Hour)})
	fixture.SetProfile(t, tx, id, fixture.ProfileChange{Timezone: fixture.Ptr("asia/kolkata")})
	fire := func(at time.Time, key string) {
		t.Helper()
		if _, err := activity.Fire(ctx, tx, id, sm.UserMessage, activity.FireOptions{At: at, RequestKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	fire(first, "m1")
	fire(first, "m1") // a retry
	fire(first.AddDate(0, 0, 30), "m2")
	fire(first.AddDate(0, 0, 30).Add(-11*time.Hour), "") // 09:10 there, a late call of the same day
	fire(first.AddDate(0, 0, 15).Add(2*time.Hour), "")   // 22:10, later still
	h := readHours(t, tx, id)
	if len(h.Hours) != 24 || h.Ref == nil || !h.Ref.Equal(first) {
		t.Fatalf("after 4 messages: %d hours from %v, want 24 from the first message's instant", len(h.Hours), h.Ref)
	}
	near := func(got float32, want float64) bool { return math.Abs(float64(got)-want) < 1e-4 }
	late := math.Pow(2, (30*24-11)/float64(30*24))
	// 20:10, 09:10 and 22:10 in Kolkata: 14, 3 and 16 UTC.
	if !near(h.Hours[14], 1+2) || !near(h.Hours[3], late) || !near(h.Hours[16], math.Pow(2, (15*24+2)/float64(30*24))) {
		t.Errorf("UTC hours 14, 3 and 16 weigh %v, %v, %v; want 3, %.4f, %.4f", h.Hours[14], h.Hours[3], h.Hours[16],
			late, math.Pow(2, (15*24+2)/float64(30*24)))
	}
	if h.Hour == nil || *h.Hour != 14 {
		t.Errorf("the user's hour is %v, want 14 (UTC)", h.Hour)
	}
	for i, w := range h.Hours {
		if i != 14 && i != 3 && i != 16 && w != 0 {
			t.Errorf("hour %d weighs %v, want 0", i, w)
		}
	}
	wantRecent := []time.Time{first.AddDate(0, 0, 30), first.AddDate(0, 0, 30).Add(-11 * time.Hour), first.AddDate(0, 0, 15).Add(2 * time.Hour)}
	if len(h.Recent) != 3 || !h.Recent[0].Equal(wantRecent[0]) || !h.Recent[1].Equal(wantRecent[1]) || !h.Recent[2].Equal(wantRecent[2]) {
		t.Errorf("the newest three are %v, want %v", h.Recent, wantRecent)
	}

	// Moves that are not the user's message count nothing.
	fixture.SetState(t, tx, id, fixture.StateChange{State: "goodbye_sent"})
	if _, err := activity.Fire(ctx, tx, id, sm.GoodbyeAnswerHelp, activity.FireOptions{At: first.AddDate(0, 0, 31)}); err != nil {
		t.Fatal(err)
	}
	if got := readHours(t, tx, id); !got.Recent[0].Equal(h.Recent[0]) || got.Hours[14] != h.Hours[14] {
		t.Errorf("an answer to the goodbye changed the hours: %+v", got)
	}

	// 400 days on: scaled down by 2^(-400/30), the reference moved.
	far := first.AddDate(0, 0, 400)
	fire(far, "")
	h = readHours(t, tx, id)
	if !h.Ref.Equal(far) || !near(h.Hours[14], 1+3*math.Pow(2, -400.0/30)) {
		t.Errorf("400 days on: reference %v, hour 14 weighs %v; want %v and %.5f", h.Ref, h.Hours[20], far, 1+3*math.Pow(2, -400.0/30))
	}

	// No usable zone: UTC.
	other := fixture.User(t, tx, fixture.UserOptions{LastActivity: first})
	fixture.SetProfile(t, tx, other, fixture.ProfileChange{Timezone: fixture.Ptr("Mars/Olympus")})
	if _, err := activity.Fire(ctx, tx, other, sm.UserMessage, activity.FireOptions{At: first}); err != nil {
		t.Fatal(err)
	}
	if got := readHours(t, tx, other); got.Hours[14] != 1 || got.Hour == nil || *got.Hour != 14 {
		t.Errorf("a user with an unusable zone: hours %v, hour %v, want the message at 14 (UTC)", got.Hours, got.Hour)
	}
	// After the rebase: another at 20:10 the next day, then one at 09:10
	// (newer, so a little heavier: not enough), then a second at 09:10,
	// which together outweigh 20:10: the hour moves to 3 (UTC).
	fire(far.AddDate(0, 0, 1), "")
	fire(far.AddDate(0, 0, 2).Add(-11*time.Hour), "")
	if got := readHours(t, tx, id); got.Hour == nil || *got.Hour != 14 {
		t.Errorf("one message at 9 after two at 20: the hour is %v, want still 14 UTC (hours %v)", got.Hour, got.Hours)
	}
	fire(far.AddDate(0, 0, 3).Add(-11*time.Hour), "")
	if got := readHours(t, tx, id); got.Hour == nil || *got.Hour != 3 {
		t.Errorf("two newer messages at 9: the hour is %v, want 3 UTC (hours %v)", got.Hour, got.Hours)
	}
}

// Issue 61's cost: engagement_fire(..., 'user_message') learns the hour
// from the instant alone and reads no other table than the user's row
// (migration 87): no probe of the profile or of the zones, which cost the
// bot's call 30 to 40 µs under migration 85 (docs/BENCHMARKS.md). Counted
// by the transaction's own statistics, pg_stat_xact_user_tables, around
// one call, with a zone of the user's own that the table of zones holds.
func TestFireReadsNoProfileForTheHour(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 1, 20, 10, 0, 0, time.UTC)
	// Committed first: a row inserted by the same transaction has its
	// foreign key checked again on any update, a read of the profile that
	// is not the call's.
	id := fixture.User(t, pool, fixture.UserOptions{LastActivity: at.Add(-time.Hour)})
	fixture.SetProfile(t, pool, id, fixture.ProfileChange{Timezone: fixture.Ptr("America/Sao_Paulo")})
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	reads := func() int {
		t.Helper()
		return fixture.ActivityTableReads(t, tx, "user_profiles", "engagement_time_zones")
	}
	before := reads()
	if _, err := activity.Fire(ctx, tx, id, sm.UserMessage, activity.FireOptions{At: at}); err != nil {
		t.Fatal(err)
	}
	if n := reads() - before; n != 0 {
		t.Errorf("engagement_fire read the profile or the zones %d times for a message, want 0", n)
	}
	if h := readHours(t, tx, id); h.Hour == nil || *h.Hour != 20 {
		t.Errorf("the hour is %v, want 20 (UTC)", h.Hour)
	}
}
