package main_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// A message sent while settling an earlier held answer failed is recorded,
// never handed back with the rest of its batch. The receiver answers the
// first message 502 (the circuit holds it) and the second 200: that 200
// settles the held 502, but another connection holds the held message's
// queue row (SELECT … FOR UPDATE) and the binary's lock_timeout fails the
// settle. Before the fix, deliverBatch released the second message with
// the rest: it went back to pending, its budget slot refunded, and the next
// run sent it to the receiver a second time (under --daily-limit 2 the
// budget counted one recipient fewer than were sent).
func TestAMessageSentWhileSettlingAHeldAnswerFailedIsNotSentAgain(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	const limit = 2
	goodbyesDue(t, pool, fixture.Now(t, pool), 3) // 3 users, each a goodbye

	ctx := context.Background()
	var mu sync.Mutex
	first := ""
	var locker pgx.Tx
	var lockErr error
	ok := map[string]int{}       // 2xx answers per Idempotency-Key
	reached := map[string]bool{} // every key the receiver got a request for
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		defer mu.Unlock()
		reached[key] = true
		if first == "" {
			first = key
			// Lock the held message's row before answering, so that the
			// settle of its 502 cannot take it.
			locker, lockErr = pool.Begin(ctx)
			if lockErr == nil {
				lockErr = fixture.LockMessageByKey(ctx, locker, key)
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		ok[key]++
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)

	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	env := cmdtest.Env("DATABASE_URL="+url+sep+"lock_timeout=300", "ENGAGEMENT_DAILY_LIMIT="+strconv.Itoa(limit),
		"ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+srv.URL)
	args := []string{"--output", "json", "--send-interval", "0", "--workers", "1", "--retry-base", "10ms"}

	res := cmdtest.Run(t, binary(t), env, args...)
	mu.Lock()
	tx, err, second, answered := locker, lockErr, "", len(ok)
	for k := range ok {
		second = k
	}
	mu.Unlock()
	if tx != nil {
		if rbErr := tx.Rollback(ctx); rbErr != nil {
			t.Fatal(rbErr)
		}
	}
	if tx == nil || err != nil {
		t.Fatalf("could not lock the first message's row: %v", err)
	}
	if res.Code == 0 {
		t.Fatalf("first run exited 0; want it to fail settling the held 502: %s", lastLines(res.Stderr, 5))
	}
	if !strings.Contains(res.Stderr, "due to lock timeout") {
		t.Fatalf("first run did not fail on the lock: %s", lastLines(res.Stderr, 5))
	}
	if answered != 1 {
		t.Fatalf("first run: %d messages answered 200, want 1 (the one after the 502)", answered)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Key: second, Status: "sent"}); n != 1 {
		t.Errorf("the message answered 200 is not recorded sent: %v", statusCounts(t, pool))
	}
	// Both messages sent kept their slots: the held one (left to recovery)
	// and the one answered 200.
	if used := fixture.Deref(fixture.BudgetOf(t, pool, "webhook").Used); used != limit {
		t.Errorf("the budget counts %d recipients after the first run, want %d: a sent message's slot was given back", used, limit)
	}

	res = cmdtest.Run(t, binary(t), env, args...)
	if res.Code != 0 {
		t.Fatalf("second run: exit %d: %s", res.Code, lastLines(res.Stderr, 5))
	}
	mu.Lock()
	defer mu.Unlock()
	if ok[second] != 1 {
		t.Errorf("the message answered 200 while the held 502's settle failed was answered 200 %d times, want once", ok[second])
	}
	if len(reached) > limit {
		t.Errorf("%d users reached under a daily limit of %d", len(reached), limit)
	}
}
