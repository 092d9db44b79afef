package sender_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/fixture"
	"github.com/engagement-scheduler/engagement/internal/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
)

func TestKeys(t *testing.T) {
	t.Parallel()
	const user = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	tests := []struct {
		name, got, want string
	}{
		{"goodbye uses the UTC date", sender.GoodbyeKey(user, time.Date(2026, 11, 22, 22, 0, 0, 0, time.FixedZone("BRT", -3*3600))), user + ":goodbye_sent:2026-11-23"},
		{"ISO week", sender.ISOWeek(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)), "2026-W48"},
		{"ISO week-year: 2027-01-01 is in 2026-W53", sender.ISOWeek(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)), "2026-W53"},
		{"ISO week-year: 2025-12-29 is in 2026-W01", sender.ISOWeek(time.Date(2025, 12, 29, 12, 0, 0, 0, time.UTC)), "2026-W01"},
		{"weekly review key", user + sender.WeeklyReviewKeySuffix(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)), user + ":weekly_review:2026-W47"},
		{"reminder key is unix ms", sender.ReminderKey(user, time.UnixMilli(1795000000123)), user + ":reminder:1795000000123"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestEnqueueIsIdempotent(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	msg := sender.Message{
		UserID: user, Type: sender.TypeWeeklyReview, Key: sender.KeyWeeklyReview,
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
