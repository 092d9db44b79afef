package sender_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

func TestKeys(t *testing.T) {
	t.Parallel()
	const user = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	tests := []struct {
		name, got, want string
	}{
		{"goodbye uses the UTC date", fixture.Goodbye.Key(user, time.Date(2026, 11, 22, 22, 0, 0, 0, time.FixedZone("BRT", -3*3600))), user + ":goodbye_sent:2026-11-23"},
		{"ISO week", sm.PerISOWeek.Label(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)), "2026-W48"},
		{"ISO week-year: 2027-01-01 is in 2026-W53", sm.PerISOWeek.Label(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)), "2026-W53"},
		{"ISO week-year: 2025-12-29 is in 2026-W01", sm.PerISOWeek.Label(time.Date(2025, 12, 29, 12, 0, 0, 0, time.UTC)), "2026-W01"},
		{"weekly review key", user + fixture.WeeklyReview.KeySuffix(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)), user + ":weekly_review:2026-W47"},
		{"reminder key is unix ms", fixture.Reminder.Key(user, time.UnixMilli(1795000000123)), user + ":reminder:1795000000123"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestPeriods(t *testing.T) {
	t.Parallel()
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	brt := time.FixedZone("BRT", -3*3600)
	tests := []struct {
		name       string
		start, end time.Time
		want       time.Time // start; end is a day or a week later
		days       int
	}{
		{"goodbye: the UTC day", first(fixture.Goodbye.Period.Bounds(time.Date(2026, 11, 22, 22, 0, 0, 0, brt))), second(fixture.Goodbye.Period.Bounds(time.Date(2026, 11, 22, 22, 0, 0, 0, brt))), day(2026, 11, 23), 1},
		{"review: Monday of the ISO week", first(fixture.WeeklyReview.Period.Bounds(day(2026, 11, 29))), second(fixture.WeeklyReview.Period.Bounds(day(2026, 11, 29))), day(2026, 11, 23), 7},
		{"review: a Monday is its own week", first(fixture.WeeklyReview.Period.Bounds(day(2026, 11, 23))), second(fixture.WeeklyReview.Period.Bounds(day(2026, 11, 23))), day(2026, 11, 23), 7},
		{"review: 2027-01-01 is in 2026-W53", first(fixture.WeeklyReview.Period.Bounds(day(2027, 1, 1))), second(fixture.WeeklyReview.Period.Bounds(day(2027, 1, 1))), day(2026, 12, 28), 7},
	}
	for _, tt := range tests {
		if !tt.start.Equal(tt.want) || !tt.end.Equal(tt.want.AddDate(0, 0, tt.days)) {
			t.Errorf("%s: [%s, %s), want [%s, +%d days)", tt.name, tt.start, tt.end, tt.want, tt.days)
		}
	}
}

func first(a, _ time.Time) time.Time  { return a }
func second(_, b time.Time) time.Time { return b }

func TestEnqueueIsIdempotent(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	msg := sender.Message{
		UserID: user, Type: fixture.WeeklyReview.Type(), Key: fixture.WeeklyReview.CatalogKey,
		Params: map[string]string{"count": "3"}, Destination: sender.DestinationIndividual,
		DestinationJID: "5511999990000@s.whatsapp.net", IdempotencyKey: user + ":weekly_review:2026-W48",
	}

	first, err := sender.Enqueue(ctx, pool, msg)
	if err != nil || first.Duplicate || first.ID == "" {
		t.Fatalf("first Enqueue = %+v, %v; want a new message", first, err)
	}
	changed := msg
	changed.Params = map[string]string{"count": "99"}
	second, err := sender.Enqueue(ctx, pool, changed)
	if err != nil || !second.Duplicate || second.ID != first.ID {
		t.Fatalf("second Enqueue = %+v, %v; want a duplicate with id %s", second, err, first.ID)
	}
	msgs := fixture.MessagesOf(t, pool, user)
	if len(msgs) != 1 || msgs[0].Params["count"] != "3" || msgs[0].Status != "pending" {
		t.Errorf("queue = %+v, want one pending message with its first params", msgs)
	}

	// Concurrent callers with one key: one row, one id.
	concurrent := msg
	concurrent.IdempotencyKey = user + ":weekly_review:2026-W49"
	var (
		wg  sync.WaitGroup
		ids = make([]string, 20)
		new = make([]bool, 20)
	)
	for i := range ids {
		wg.Go(func() {
			q, err := sender.Enqueue(ctx, pool, concurrent)
			if err != nil {
				t.Error(err)
			}
			ids[i], new[i] = q.ID, !q.Duplicate
		})
	}
	wg.Wait()
	created := 0
	for i := range ids {
		if ids[i] != ids[0] {
			t.Errorf("caller %d got id %s, caller 0 %s", i, ids[i], ids[0])
		}
		if new[i] {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d callers were told they created the message, want 1", created)
	}

	// Without a key, every call queues a message.
	noKey := msg
	noKey.IdempotencyKey = ""
	a, errA := sender.Enqueue(ctx, pool, noKey)
	b, errB := sender.Enqueue(ctx, pool, noKey)
	if errA != nil || errB != nil || a.ID == b.ID || a.Duplicate || b.Duplicate {
		t.Errorf("keyless Enqueue twice = %+v %+v (%v %v), want two new messages", a, b, errA, errB)
	}
	if n := len(fixture.MessagesOf(t, pool, user)); n != 4 {
		t.Errorf("%d messages queued, want 4", n)
	}
}

func TestEnqueueKeysAndRouting(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	user := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now(),
		Destination: "group", GroupJID: fixture.Ptr("120363000000000042@g.us")})
	msg := sender.Message{UserID: user, Type: fixture.Reminder.Type(), IdempotencyKey: "  k "}

	first, err := sender.Enqueue(ctx, tx, msg)
	if err != nil || first.Duplicate {
		t.Fatalf("first = %+v, %v", first, err)
	}
	msg.IdempotencyKey = "k"
	second, err := sender.Enqueue(ctx, tx, msg)
	if err != nil || !second.Duplicate || second.ID != first.ID || second.PayloadDiffers {
		t.Errorf(`"k" after "  k ": %+v, %v; want the same message, same payload`, second, err)
	}
	msg.Params = map[string]string{"count": "1"}
	if third, err := sender.Enqueue(ctx, tx, msg); err != nil || !third.PayloadDiffers || third.ID != first.ID {
		t.Errorf("replay with other params: %+v, %v; want the same id, flagged as differing", third, err)
	}
	msgs := fixture.MessagesOf(t, tx, user)
	if len(msgs) != 1 || *msgs[0].IdempotencyKey != "k" || msgs[0].Destination != "group" || msgs[0].DestinationJID != "120363000000000042@g.us" || len(msgs[0].Params) != 0 {
		t.Errorf("queue = %+v, want one message keyed \"k\", routed to the profile's group, params as first written", msgs)
	}

	long := strings.Repeat("x", sender.MaxKeyLength+1)
	if _, err := sender.Enqueue(ctx, tx, sender.Message{UserID: user, Type: fixture.Reminder.Type(), IdempotencyKey: long}); !errors.Is(err, sender.ErrKeyTooLong) || !strings.Contains(err.Error(), "128") {
		t.Errorf("a %d-character key: %v, want ErrKeyTooLong stating the limit", len(long), err)
	}
	if _, err := sender.Enqueue(ctx, tx, sender.Message{UserID: user, Type: fixture.Reminder.Type(), IdempotencyKey: "  " + strings.Repeat("y", 128) + " "}); err != nil {
		t.Errorf("a 128-character key with spaces around: %v, want it accepted", err)
	}
	// Issue 31: a key delivery would refuse (sender.ValidateKey) is
	// refused here, before anything is written.
	for _, bad := range []string{"k\r\nX-Injected: 1", "week\t48", "week\a48"} {
		if _, err := sender.Enqueue(ctx, tx, sender.Message{UserID: user, Type: fixture.Reminder.Type(), IdempotencyKey: bad}); !errors.Is(err, sender.ErrInvalidKey) || !strings.Contains(err.Error(), "control character") {
			t.Errorf("key %q: %v, want ErrInvalidKey naming the control character", bad, err)
		}
	}
	if n := len(fixture.MessagesOf(t, tx, user)); n != 2 {
		t.Errorf("%d messages, want 2: the long key and the keys with control characters wrote nothing", n)
	}

	nobody := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: fixture.NoJID})
	if _, err := sender.Enqueue(ctx, tx, sender.Message{UserID: nobody, Type: fixture.Reminder.Type()}); !errors.Is(err, sender.ErrNoDestination) {
		t.Errorf("user without a JID: %v, want ErrNoDestination", err)
	}
}
