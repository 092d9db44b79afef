package delivery_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/idempotency"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/recovered"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// receiver is a fake bot webhook that records every request and answers
// with the next status of its script (the last one repeats).
type receiver struct {
	mu       sync.Mutex
	statuses []int
	requests []received
	server   *httptest.Server
}

type received struct {
	at             time.Time
	idempotencyKey string
	signature      string
	body           []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := r.statuses[min(len(r.requests), len(r.statuses)-1)]
		r.requests = append(r.requests, received{time.Now(), req.Header.Get("Idempotency-Key"), req.Header.Get("X-Engagement-Signature"), body})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.server.Close)
	return r
}

func (r *receiver) got() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.requests...)
}

func webhook(t *testing.T, url, secret string) transport.Transport {
	t.Helper()
	w, err := transport.NewWebhook(transport.WebhookConfig{URL: url, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// queue puts a message for user in the queue with the given status and
// schedule and returns its id.
func queue(t *testing.T, pool *pgxpool.Pool, user, key, status string, scheduledFor time.Time) string {
	t.Helper()
	return fixture.Queue(t, pool, fixture.Message{
		User: user, Type: "weekly_review", CatalogKey: key, Params: `{"count":"3"}`, JID: "5511999990000@s.whatsapp.net",
		ScheduledFor: scheduledFor, Status: status, Key: user + ":test:" + fixture.NewID(),
	})
}

// rowOf reads the queued message id.
func rowOf(t *testing.T, pool *pgxpool.Pool, id string) fixture.MessageRow {
	t.Helper()
	return fixture.MessageByID(t, pool, id)
}

func run(t *testing.T, pool *pgxpool.Pool, cfg delivery.ProcessorConfig) delivery.ProcessSummary {
	t.Helper()
	cfg.Logger = zerolog.Nop()
	p, err := delivery.NewProcessor(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := p.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sum
}

func TestProcessorDeliversDueMessagesOnce(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	rcv := newReceiver(t, 200)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), Locale: "en"})
	past := time.Now().Add(-time.Hour)
	due := []string{
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", past),
		queue(t, pool, user, fixture.Goodbye.CatalogKey, "pending", past),
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", past),
	}
	untouched := map[string]string{
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(time.Hour)): "pending",
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "cancelled", past):                    "cancelled",
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "sent", past):                         "sent",
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "failed", past):                       "failed",
	}

	sum := run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, "s3cret"), SendInterval: -1})

	if sum.Sent != 3 || sum.Failed != 0 || sum.Retried != 0 || sum.Processed != 3 {
		t.Errorf("summary %+v, want 3 processed and sent", sum)
	}
	reqs := rcv.got()
	if len(reqs) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(reqs))
	}
	keys := map[string]bool{}
	for _, r := range reqs {
		keys[r.idempotencyKey] = true
		if !transport.VerifySignature("s3cret", r.body, r.signature) {
			t.Errorf("request signature %q does not verify", r.signature)
		}
	}
	if len(keys) != 3 {
		t.Errorf("idempotency keys %v, want 3 distinct", keys)
	}
	for _, id := range due {
		if r := rowOf(t, pool, id); r.Status != "sent" || r.SentAt == nil || r.RetryCount != 0 {
			t.Errorf("due message %s: %+v, want sent with sent_at", id, r)
		}
	}
	for id, status := range untouched {
		if r := rowOf(t, pool, id); r.Status != status || r.SentAt != nil {
			t.Errorf("message %s: %+v, want it left %s", id, r, status)
		}
	}
	if n := fixture.CountLedger(t, pool, fixture.LedgerRows{Status: "sent", Attempts: 1}); n != 3 {
		t.Errorf("%d ledger rows sent after one attempt, want 3", n)
	}

	// A second run finds nothing to do.
	if again := run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1}); again.Processed != 0 || len(rcv.got()) != 3 {
		t.Errorf("second run %+v, receiver %d requests; want nothing sent again", again, len(rcv.got()))
	}
}

func TestProcessorRetries(t *testing.T) {
	t.Parallel()
	const base = 40 * time.Millisecond
	tests := []struct {
		name         string
		statuses     []int
		wantRequests int
		wantStatus   string
		wantRetries  int
	}{
		{"always 5xx: 1 attempt + 3 retries, then failed", []int{500}, 4, "failed", 3},
		{"one 5xx then 2xx: sent after one retry", []int{500, 200}, 2, "sent", 1},
		{"429 is transient", []int{429, 200}, 2, "sent", 1},
		{"400 fails at once", []int{400}, 1, "failed", 0},
		{"404 fails at once", []int{404, 200}, 1, "failed", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			rcv := newReceiver(t, tt.statuses...)
			user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
			id := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))

			run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1, RetryBase: base})

			reqs := rcv.got()
			if len(reqs) != tt.wantRequests {
				t.Fatalf("receiver got %d requests, want %d", len(reqs), tt.wantRequests)
			}
			for i := 1; i < len(reqs); i++ {
				if reqs[i].idempotencyKey != reqs[0].idempotencyKey {
					t.Errorf("attempt %d used key %q, attempt 1 %q", i+1, reqs[i].idempotencyKey, reqs[0].idempotencyKey)
				}
				gap := reqs[i].at.Sub(reqs[i-1].at)
				if want := base << (i - 1); gap < want {
					t.Errorf("gap before attempt %d = %s, want at least %s (exponential backoff)", i+1, gap, want)
				}
			}
			r := rowOf(t, pool, id)
			if r.Status != tt.wantStatus || r.RetryCount != tt.wantRetries {
				t.Errorf("message %+v, want status %s retry_count %d", r, tt.wantStatus, tt.wantRetries)
			}
			if tt.wantStatus == "failed" && (r.ErrorMessage == nil || *r.ErrorMessage == "") {
				t.Error("failed message has no error_message")
			}
		})
	}
}

func TestProcessorUnknownKeyFailsThatMessageOnly(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	rcv := newReceiver(t, 200)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	bad := queue(t, pool, user, "engagement.no_such_message", "pending", time.Now().Add(-time.Minute))
	good := queue(t, pool, user, fixture.Goodbye.CatalogKey, "pending", time.Now().Add(-time.Minute))

	sum := run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1})

	if r := rowOf(t, pool, bad); r.Status != "failed" || r.ErrorMessage == nil || !contains(*r.ErrorMessage, "engagement.no_such_message") {
		t.Errorf("unknown key message %+v, want failed naming the key", r)
	}
	if r := rowOf(t, pool, good); r.Status != "sent" {
		t.Errorf("the other message %+v, want sent", r)
	}
	if sum.Sent != 1 || sum.Failed != 1 || len(rcv.got()) != 1 {
		t.Errorf("summary %+v with %d requests, want 1 sent, 1 failed, 1 request", sum, len(rcv.got()))
	}
}

func TestProcessorSettlesAbandonedClaims(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	past := time.Now().Add(-time.Hour)
	// Three messages a dead worker held, their claims expired: one it never
	// started, one whose send's outcome is unknown, one it had sent.
	notStarted := queue(t, pool, user, fixture.Goodbye.CatalogKey, "processing", past)
	inFlight := queue(t, pool, user, fixture.Goodbye.CatalogKey, "processing", past)
	delivered := queue(t, pool, user, fixture.Goodbye.CatalogKey, "processing", past)
	fixture.SetMessages(t, pool, fixture.MessageChange{ClaimedBy: "dead", ClaimedUntil: time.Now().Add(-time.Minute)})
	for id, status := range map[string]string{inFlight: "processing", delivered: "sent"} {
		for _, tr := range []string{"webhook", "log"} {
			fixture.Ledger(t, pool, fixture.LedgerRow{Message: id, Transport: tr, Status: status})
		}
	}

	t.Run("a transport that de-duplicates resends under the same key", func(t *testing.T) {
		rcv := newReceiver(t, 200)
		sum := run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1})
		if sum.Recovered != 3 {
			t.Errorf("recovered %d, want 3", sum.Recovered)
		}
		for _, id := range []string{notStarted, inFlight, delivered} {
			if r := rowOf(t, pool, id); r.Status != "sent" {
				t.Errorf("message %s: %+v, want sent", id, r)
			}
		}
		if n := len(rcv.got()); n != 2 {
			t.Errorf("receiver got %d requests, want 2: the one already delivered is not sent again", n)
		}
		if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "processing"}); n != 0 {
			t.Errorf("%d messages still claimed", n)
		}
	})
}

func TestProcessorOutcomeUnknownFailsOnTransportsThatCannotDeduplicate(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	id := queue(t, pool, user, fixture.Goodbye.CatalogKey, "processing", time.Now().Add(-time.Hour))
	fixture.ExpireClaims(t, pool)
	fixture.Ledger(t, pool, fixture.LedgerRow{Message: id, Transport: "fake", Status: "processing"})
	sent := 0
	run(t, pool, delivery.ProcessorConfig{Transport: &fakeTransport{send: func() { sent++ }}, SendInterval: -1})
	r := rowOf(t, pool, id)
	if r.Status != "failed" || r.ErrorMessage == nil || !contains(*r.ErrorMessage, "outcome unknown") || sent != 0 {
		t.Errorf("message %+v after %d sends, want failed with outcome unknown and no send", r, sent)
	}
}

// fakeTransport cannot de-duplicate.
type fakeTransport struct{ send func() }

func (f *fakeTransport) Name() string       { return "fake" }
func (f *fakeTransport) Deduplicates() bool { return false }
func (f *fakeTransport) Send(context.Context, transport.Delivery) (transport.Result, error) {
	f.send()
	return transport.Result{ProviderMessageID: "fake-1"}, nil
}

func TestProcessorPaceHoldsAcrossProcessors(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	rcv := newReceiver(t, 200)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for range 6 {
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	}
	const interval = 150 * time.Millisecond
	var wg sync.WaitGroup
	for range 2 {
		other, err := postgres.Open(context.Background(), url, "queue-process")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		wg.Go(func() {
			run(t, other, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: interval, ClaimBatch: 1})
		})
	}
	wg.Wait()
	reqs := rcv.got()
	if len(reqs) != 6 {
		t.Fatalf("receiver got %d requests, want each of the 6 messages once", len(reqs))
	}
	seen := map[string]bool{}
	arrivals := make([]time.Time, len(reqs))
	for i, r := range reqs {
		if seen[r.idempotencyKey] {
			t.Errorf("message %s sent twice", r.idempotencyKey)
		}
		seen[r.idempotencyKey] = true
		arrivals[i] = r.at
	}
	fixture.CheckPace(t, arrivals, interval)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestProcessorDedupeStoreGuardsSends(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	rcv := newReceiver(t, 500, 200) // the first request fails, the next succeed
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	seen := queue(t, pool, user, fixture.Goodbye.CatalogKey, "pending", time.Now().Add(-time.Minute))
	fresh := queue(t, pool, user, fixture.Goodbye.CatalogKey, "pending", time.Now().Add(time.Millisecond))
	store := idempotency.NewPostgres(pool, idempotency.Options{})
	seenKey := fixture.MessageByID(t, pool, seen).Key()
	// A delivery of this message was recorded in the store (by another
	// sender sharing it, say).
	if err := store.StoreResult(ctx, "send:webhook:"+seenKey, []byte("delivered"), time.Hour); err != nil {
		t.Fatalf("recording the key: %v", err)
	}

	sum := run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1,
		RetryBase: 10 * time.Millisecond, Dedupe: store})

	if r := rowOf(t, pool, seen); r.Status != "sent" || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "dedupe store") {
		t.Errorf("message with a seen key: %+v, want marked sent without a send, with a note", r)
	}
	// The fresh message's first send fails (500): its key is not recorded,
	// so the retry goes through.
	if r := rowOf(t, pool, fresh); r.Status != "sent" || r.RetryCount != 1 {
		t.Errorf("fresh message: %+v, want sent after one retry", r)
	}
	if n := len(rcv.got()); n != 2 || sum.Deduplicated != 1 {
		t.Errorf("receiver got %d requests, deduplicated %d; want 2 (the fresh message twice) and 1", n, sum.Deduplicated)
	}
}

// Issue 24, point 4: a panic in a worker goroutine killed the process with
// Go's exit code 2 (a configuration error, to the contract and to the
// shipped podFailurePolicy), leaving its claims behind. It ends the run
// like any fatal error instead: Run returns it with the worker's stack,
// and every claim is handed back or settled first.
func TestAPanicInAWorkerEndsTheRunAndLeavesNoClaim(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for range 20 {
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	}
	var sends atomic.Int32
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Logger: zerolog.Nop(), SendInterval: -1, Workers: 4,
		Transport: &fakeTransport{send: func() {
			if sends.Add(1) == 3 {
				panic("transport bug")
			}
		}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(context.Background())
	var pe *recovered.Error
	if !errors.As(err, &pe) || pe.Value != "transport bug" || !strings.Contains(string(pe.Stack), "fakeTransport") {
		t.Fatalf("Run: %v; want the worker's panic with its stack", err)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "processing"}); n != 0 {
		t.Errorf("%d messages left processing after the panic, want none", n)
	}
}
