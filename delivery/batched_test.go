package delivery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// These tests drive the batched recording (a de-duplicating transport)
// through the processor's internals, to stop it where a kill would.

// keyRecorder is a webhook receiver that answers 200 and records the
// Idempotency-Key of every request; onRequest, when set, runs first.
type keyRecorder struct {
	mu        sync.Mutex
	keys      []string
	onRequest func()
	server    *httptest.Server
}

func newKeyRecorder(t *testing.T) *keyRecorder {
	r := &keyRecorder{}
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
		f := r.onRequest
		r.mu.Unlock()
		if f != nil {
			f()
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.server.Close)
	return r
}

func (r *keyRecorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

func batchedProcessor(t *testing.T, pool *pgxpool.Pool, url string, cfg ProcessorConfig) *Processor {
	t.Helper()
	tr, err := transport.NewWebhook(transport.WebhookConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Transport, cfg.Logger = tr, zerolog.Nop()
	p, err := NewProcessor(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.newRun(func(error) {}).recording().(*batchedRecording); !ok {
		t.Fatal("a webhook should take the batched path")
	}
	return p
}

// queueDue queues n due weekly reviews (their user is active, so the
// send-time checks let them through) and returns their ids and keys.
func queueDue(t *testing.T, pool *pgxpool.Pool, n int) (ids, keys []string) {
	t.Helper()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	due := time.Now().Add(-time.Minute)
	for i := range n {
		key := fixture.NewID()
		ids = append(ids, fixture.Queue(t, pool, fixture.Message{
			User: user, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey, Params: `{"count":"2"}`,
			JID: "5511999990000@s.whatsapp.net", ScheduledFor: due.Add(time.Duration(i) * time.Millisecond), Key: key,
		}))
		keys = append(keys, key)
	}
	return ids, keys
}

// ledgerOf returns the message's webhook ledger row, or nil without one.
func ledgerOf(t *testing.T, pool *pgxpool.Pool, id string) *fixture.LedgerEntry {
	t.Helper()
	return fixture.LedgerOf(t, pool, id, "webhook")
}

// A worker killed after sending but before its batch's outcomes were
// recorded leaves the batch claimed, with nothing in the ledger. Once the claims
// expire, the next run resends the sent message under its same key (the
// receiver drops it) and sends the unsent one once; nothing goes out under
// another key.
func TestBatchedKillBeforeTheRecordResendsUnderTheSameKey(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	ids, keys := queueDue(t, pool, 2)
	rcv := newKeyRecorder(t)
	dead := batchedProcessor(t, pool, rcv.server.URL, ProcessorConfig{SendInterval: -1, ClaimBatch: 2}).newRun(func(error) {})

	if _, err := dead.hold(ctx, pool); err != nil {
		t.Fatal(err)
	}
	batch, _, err := dead.claim(ctx)
	if err != nil || len(batch) != 2 {
		t.Fatalf("claim: %d messages, %v; want 2", len(batch), err)
	}
	o, err := dead.deliver(ctx, dead.recording(), dead.sendCheck(batch, time.Now()), 0)
	if err != nil || o.end != endRecord || o.outcome.status != "sent" {
		t.Fatalf("send: %v, %+v", err, o)
	}
	// Killed here: the outcome is never recorded, the second message never sent.
	if l := ledgerOf(t, pool, ids[0]); l != nil {
		t.Fatalf("ledger after the kill: %+v, want no row (the batched recording writes no start)", l)
	}
	// Time passes (the clock is the database's): the claims expire.
	fixture.ExpireClaims(t, pool)

	next := batchedProcessor(t, pool, rcv.server.URL, ProcessorConfig{SendInterval: -1})
	sum, err := next.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Recovered != 2 || sum.Sent != 2 {
		t.Errorf("summary %+v, want 2 recovered, 2 sent", sum)
	}
	got := rcv.got()
	count := map[string]int{}
	for _, k := range got {
		count[k]++
	}
	if len(got) != 3 || count[keys[0]] != 2 || count[keys[1]] != 1 {
		t.Errorf("requests carried keys %v; want %s twice (the resend) and %s once", got, keys[0], keys[1])
	}
	for _, id := range ids {
		if l := ledgerOf(t, pool, id); l == nil || l.Status != "sent" {
			t.Errorf("message %s's ledger: %+v, want sent", id, l)
		}
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}) - fixture.CountMessages(t, pool, fixture.Messages{Status: "sent"}); n != 0 {
		t.Errorf("%d messages not sent", n)
	}
}
