package sender

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/fixture"
	"github.com/engagement-scheduler/engagement/internal/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// These tests drive the batched path (a de-duplicating transport, no
// pacing) through the processor's internals, to stop it where a signal or
// a kill would.

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
	if !p.batched {
		t.Fatal("a webhook without pacing should take the batched path")
	}
	return p
}

// queueDue queues n due goodbye messages and returns their ids and keys.
func queueDue(t *testing.T, pool *pgxpool.Pool, n int) (ids, keys []string) {
	t.Helper()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for i := range n {
		var id, key string
		err := pool.QueryRow(context.Background(), `
			INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
			       destination_jid, scheduled_for, status, idempotency_key)
			VALUES ($1, 'goodbye', $2, '{}', 'individual', '5511999990000@s.whatsapp.net',
			       now() - interval '1 minute' + $3 * interval '1 ms', 'pending', gen_random_uuid()::text)
			RETURNING id::text, idempotency_key`, user, KeyGoodbye, i).Scan(&id, &key)
		if err != nil {
			t.Fatal(err)
		}
		ids, keys = append(ids, id), append(keys, key)
	}
	return ids, keys
}

type ledgerState struct {
	Status   string
	Attempts int
	Error    *string
	Last     time.Time
}

// ledgerOf returns the message's webhook ledger row, or nil without one.
func ledgerOf(t *testing.T, pool *pgxpool.Pool, id string) *ledgerState {
	t.Helper()
	var l ledgerState
	err := pool.QueryRow(context.Background(), `
		SELECT status, attempts, error, last_attempt_at FROM engagement_processed_messages
		 WHERE message_id = $1 AND transport = 'webhook'`, id).Scan(&l.Status, &l.Attempts, &l.Error, &l.Last)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		t.Fatal(err)
	}
	return &l
}

// The claim writes each attempt's start; releasing the messages unsent puts
// the ledger back as it was: no row where there was none, the earlier
// attempt (count, error, time) where there was one.
func TestBatchedReleasePutsTheLedgerBack(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	ids, _ := queueDue(t, pool, 2)
	fresh, retried := ids[0], ids[1]
	// retried failed its first attempt an hour ago.
	if _, err := pool.Exec(ctx, `
		INSERT INTO engagement_processed_messages (message_id, transport, status, attempts, error, last_attempt_at)
		VALUES ($1, 'webhook', 'failed', 1, 'HTTP 503', now() - interval '1 hour')`, retried); err != nil {
		t.Fatal(err)
	}
	before := ledgerOf(t, pool, retried)
	p := batchedProcessor(t, pool, "http://127.0.0.1:1", ProcessorConfig{SendInterval: 0})

	batch, err := p.claim(ctx)
	if err != nil || len(batch) != 2 {
		t.Fatalf("claim: %d messages, %v; want 2", len(batch), err)
	}
	if l := ledgerOf(t, pool, fresh); l == nil || l.Status != "processing" || l.Attempts != 1 {
		t.Errorf("fresh message's ledger after the claim: %+v, want processing, 1 attempt", l)
	}
	if l := ledgerOf(t, pool, retried); l == nil || l.Status != "processing" || l.Attempts != 2 || l.Error != nil {
		t.Errorf("retried message's ledger after the claim: %+v, want processing, 2 attempts, no error", l)
	}

	if err := p.release(batch); err != nil {
		t.Fatal(err)
	}
	if n := fixture.Count(t, pool, `SELECT count(*) FROM engagement_message_queue WHERE status <> 'pending' OR claimed_by IS NOT NULL`); n != 0 {
		t.Errorf("%d messages not back to pending and unclaimed", n)
	}
	if l := ledgerOf(t, pool, fresh); l != nil {
		t.Errorf("fresh message's ledger after the release: %+v, want no row", l)
	}
	if l := ledgerOf(t, pool, retried); l == nil || l.Status != before.Status || l.Attempts != before.Attempts ||
		l.Error == nil || *l.Error != *before.Error || !l.Last.Equal(before.Last) {
		t.Errorf("retried message's ledger after the release: %+v, want it as before the claim: %+v", l, before)
	}
}

// A run stopped midway (SIGTERM, --max-duration) records the send in
// flight and releases the rest, leaving no "processing" ledger row and no
// attempt counted for a message it did not send.
func TestBatchedStopLeavesNoStartedAttemptForUnsentMessages(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ids, keys := queueDue(t, pool, 5)
	rcv := newKeyRecorder(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rcv.onRequest = cancel // the shutdown begins during the first send
	p := batchedProcessor(t, pool, rcv.server.URL, ProcessorConfig{SendInterval: 0, Workers: 1, ClaimBatch: 5})

	sum, err := p.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := rcv.got(); len(got) != 1 || got[0] != keys[0] || sum.Sent != 1 || sum.Processed != 1 {
		t.Fatalf("requests %v, summary %+v; want the first message sent once", got, sum)
	}
	if l := ledgerOf(t, pool, ids[0]); l == nil || l.Status != "sent" || l.Attempts != 1 {
		t.Errorf("sent message's ledger: %+v, want sent after 1 attempt", l)
	}
	for _, id := range ids[1:] {
		if l := ledgerOf(t, pool, id); l != nil {
			t.Errorf("unsent message %s has a ledger row %+v, want none", id, l)
		}
	}
	if n := fixture.Count(t, pool, `SELECT count(*) FROM engagement_processed_messages WHERE status = 'processing'`); n != 0 {
		t.Errorf("%d ledger rows left processing", n)
	}
	if n := fixture.Count(t, pool, `SELECT count(*) FROM engagement_message_queue WHERE status = 'pending' AND claimed_by IS NULL`); n != 4 {
		t.Errorf("%d messages pending and unclaimed, want the 4 unsent", n)
	}
}

// A worker killed after sending but before its batch's outcomes were
// recorded leaves the batch claimed with started attempts. Once the claims
// expire, the next run resends the sent message under its same key (the
// receiver drops it) and sends the unsent one once; nothing goes out under
// another key.
func TestBatchedKillBeforeTheRecordResendsUnderTheSameKey(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	ids, keys := queueDue(t, pool, 2)
	rcv := newKeyRecorder(t)
	dead := batchedProcessor(t, pool, rcv.server.URL, ProcessorConfig{SendInterval: 0, ClaimBatch: 2})

	batch, err := dead.claim(ctx)
	if err != nil || len(batch) != 2 {
		t.Fatalf("claim: %d messages, %v; want 2", len(batch), err)
	}
	var done []settled
	var sum ProcessSummary
	if err := dead.deliver(ctx, batch[0], &sum, zerolog.Nop(), &done); err != nil || len(done) != 1 || done[0].o.status != "sent" {
		t.Fatalf("send: %v, %+v", err, done)
	}
	// Killed here: the outcome is never recorded, the second message never sent.
	if l := ledgerOf(t, pool, ids[0]); l == nil || l.Status != "processing" || l.Attempts != 1 {
		t.Fatalf("ledger after the kill: %+v, want processing, 1 attempt", l)
	}
	// Time passes (the clock is the database's): the claims expire.
	if _, err := pool.Exec(ctx, `UPDATE engagement_message_queue SET claimed_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}

	next := batchedProcessor(t, pool, rcv.server.URL, ProcessorConfig{SendInterval: 0})
	sum, err = next.Run(ctx)
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
	if n := fixture.Count(t, pool, `SELECT count(*) FROM engagement_message_queue WHERE status <> 'sent'`); n != 0 {
		t.Errorf("%d messages not sent", n)
	}
}

// A batch whose claim is half over (slow receivers) stops sending, records
// what it sent and releases the rest for a fresh claim, so no message is
// sent while its claim may already pass for abandoned. With a claim
// lifetime of 1 ns every batch sends one message: each is still sent once,
// with one attempt in the ledger.
func TestBatchedAgedClaimIsReleasedNotOutlived(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ids, keys := queueDue(t, pool, 3)
	rcv := newKeyRecorder(t)
	p := batchedProcessor(t, pool, rcv.server.URL, ProcessorConfig{SendInterval: 0, Workers: 1, ClaimTimeout: time.Nanosecond})

	sum, err := p.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := rcv.got(); len(got) != 3 || got[0] != keys[0] || got[1] != keys[1] || got[2] != keys[2] || sum.Sent != 3 {
		t.Errorf("requests %v, summary %+v; want each message sent once, in order", got, sum)
	}
	for _, id := range ids {
		if l := ledgerOf(t, pool, id); l == nil || l.Status != "sent" || l.Attempts != 1 {
			t.Errorf("message %s's ledger: %+v, want sent after 1 attempt", id, l)
		}
	}
}
