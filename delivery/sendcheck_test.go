package delivery_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// firstHeldReceiver is a webhook receiver that holds the first request it
// gets until release is called, and answers every request 200. It records
// each request's Idempotency-Key.
type firstHeldReceiver struct {
	server  *httptest.Server
	arrived chan struct{} // closed when the first request is in
	free    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	keys    []string
}

func newFirstHeldReceiver(t *testing.T) *firstHeldReceiver {
	r := &firstHeldReceiver{arrived: make(chan struct{}), free: make(chan struct{})}
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
		first := len(r.keys) == 1
		r.mu.Unlock()
		if first {
			close(r.arrived)
			<-r.free
		}
	}))
	t.Cleanup(r.server.Close)
	t.Cleanup(r.release) // before the server closes (cleanups run last first)
	return r
}

func (r *firstHeldReceiver) release() { r.once.Do(func() { close(r.free) }) }

func (r *firstHeldReceiver) got() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, k := range r.keys {
		out[k]++
	}
	return out
}

// Issue 42, finding 5: the send-time checks ran when queue-process claimed
// a batch, not when each message went out: unpaced, a worker claims 400
// and sends them one after another, and goodbyes went to users who had
// answered seconds before (482 of 7,835 in a race with the bot). Here the
// bot answers for every user but the first through engagement_fire, on a
// connection of its own, while the first message's request is held by the
// receiver: after the claim and before any other send.
//
// Paced, each message is checked right before its own send: every later
// one is cancelled 'stale' and never sent. Unpaced, the claim's check
// stands for delivery.RecheckAge: once it is older (the processor's clock
// is the test's, moved past it while the request is held), every later
// message is checked again and cancelled; within it, they go, as
// docs/delivery.md says.
func TestTheBotsMoveAfterTheClaimStopsTheSend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		interval time.Duration
		aged     time.Duration // how far the test's clock moves while the first request is held
		stopped  bool          // whether the later goodbyes must be cancelled
	}{
		{"paced", 20 * time.Millisecond, 0, true},
		{"unpaced, the claim's check older than RecheckAge", -1, delivery.RecheckAge + time.Millisecond, true},
		{"unpaced, within RecheckAge of the claim", -1, delivery.RecheckAge - 10*time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const messages = 5
			pool, dbURL := pgtest.NewPool(t)
			ctx := context.Background()
			bot, err := postgres.Open(ctx, dbURL, "bot") // the bot's own connections
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(bot.Close)
			users, ids, keys := queueGoodbyes(t, pool, messages)
			rcv := newFirstHeldReceiver(t)

			p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""),
				// One worker: every send waits behind the held one (with
				// more, another worker's message could be checked and
				// sent before the bot's move, rightly).
				SendInterval: tc.interval, Workers: 1, ClaimBatch: messages, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var moved atomic.Int64
			delivery.SetCheckClock(p, func() time.Time { return start.Add(time.Duration(moved.Load())) })
			type result struct {
				sum delivery.ProcessSummary
				err error
			}
			done := make(chan result, 1)
			go func() {
				sum, err := p.Run(ctx)
				done <- result{sum, err}
			}()

			select { // the first goodbye is being sent: every message is claimed
			case <-rcv.arrived:
			case r := <-done:
				t.Fatalf("the run ended before its first send: %+v, %v", r.sum, r.err)
			}
			if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "processing"}); n != messages {
				t.Fatalf("%d messages claimed while the first is sent, want all %d", n, messages)
			}
			for _, u := range users[1:] {
				if _, err := activity.Fire(ctx, bot, u, sm.GoodbyeAnswerHelp, activity.FireOptions{}); err != nil {
					t.Fatalf("the bot's move: %v", err)
				}
			}
			moved.Store(int64(tc.aged))
			rcv.release()
			r := <-done
			if r.err != nil {
				t.Fatalf("Run: %v", r.err)
			}

			got := rcv.got()
			if got[keys[0]] != 1 {
				t.Errorf("the first goodbye reached the receiver %d times, want once", got[keys[0]])
			}
			for i := 1; i < messages; i++ {
				row := cancelOf(t, pool, ids[i])
				if tc.stopped && (row.Status != "cancelled" || deref(row.Reason) != "stale" || got[keys[i]] != 0) {
					t.Errorf("goodbye %d, to a user who answered after the claim: %s (%s), reached the receiver %d times; want cancelled 'stale', never sent",
						i, row.Status, deref(row.Reason), got[keys[i]])
				}
				if !tc.stopped && (row.Status != "sent" || got[keys[i]] != 1) {
					t.Errorf("goodbye %d, checked by a claim younger than RecheckAge: %s (%s), reached the receiver %d times; want sent once",
						i, row.Status, deref(row.Reason), got[keys[i]])
				}
			}
			wantCancelled := 0
			if tc.stopped {
				wantCancelled = messages - 1
			}
			if r.sum.Cancelled != wantCancelled || r.sum.CancelReasons["stale"] != wantCancelled || r.sum.Sent != messages-wantCancelled {
				t.Errorf("summary %+v, want %d cancelled (stale) and %d sent", r.sum, wantCancelled, messages-wantCancelled)
			}
			if n := fixture.CountMessages(t, pool, fixture.Messages{}) - fixture.CountMessages(t, pool, fixture.Messages{Status: "sent"}) -
				fixture.CountMessages(t, pool, fixture.Messages{Status: "cancelled"}); n != 0 {
				t.Errorf("%d messages neither sent nor cancelled", n)
			}
		})
	}
}

// queueGoodbyes makes n users in goodbye_sent since today's daily run, each
// with their goodbye queued as that run queues it (its key and period),
// due one second apart so they are claimed and sent in order; it returns
// the users, the messages' ids and their idempotency keys, in that order.
func queueGoodbyes(t *testing.T, pool *pgxpool.Pool, n int) (users, ids, keys []string) {
	t.Helper()
	now := time.Now()
	day := now.UTC().Truncate(24 * time.Hour)
	start, _ := fixture.Goodbye.Period.Bounds(day)
	for i := range n {
		u := fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: day.Add(-15 * 24 * time.Hour),
			GoodbyeSentAt: &day, GoodbyeExpiresAt: fixture.Ptr(day.Add(48 * time.Hour))})
		k := fixture.Goodbye.Key(u, day)
		id := fixture.Queue(t, pool, fixture.Message{User: u, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select",
			JID: fmt.Sprintf("55119%08d@s.whatsapp.net", i), ScheduledFor: now.Add(-time.Duration(n+1-i) * time.Second),
			Key: k, PeriodStart: start})
		users, ids, keys = append(users, u), append(ids, id), append(keys, k)
	}
	return users, ids, keys
}
