package delivery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// BenchmarkQueue measures end-to-end delivery (claim, ledger, request,
// mark) with pacing off, against a local webhook that answers at once.
// Messages: BENCH_MESSAGES (default 20,000).
func BenchmarkQueue(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	hook, err := transport.NewWebhook(transport.WebhookConfig{URL: srv.URL, Secret: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	benchDelivery(b, hook)
}

// BenchmarkQueueStatements is BenchmarkQueue with a transport that answers
// at once without a request: the engine's own statements (claim, record,
// ledger) alone, the share of the cost that is this project's rather
// than HTTP's. Messages: BENCH_MESSAGES (default 20,000).
func BenchmarkQueueStatements(b *testing.B) { benchDelivery(b, instant{}) }

// benchDelivery queues BENCH_MESSAGES (default 20,000) due weekly reviews
// each round and times one unpaced processor run delivering them through t.
func benchDelivery(b *testing.B, t transport.Transport) {
	n := 20_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_MESSAGES")); err == nil && v > 0 {
		n = v
	}
	pool, _ := pgtest.NewPool(b)
	ctx := context.Background()
	var total time.Duration
	sent := 0
	for b.Loop() {
		fixture.DueReviews(b, pool, n, fixture.NewID())
		p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: t, SendInterval: -1, Logger: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		sum, err := p.Run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(t0)
		if sum.Sent != n {
			b.Fatalf("sent %d of %d", sum.Sent, n)
		}
		sent += sum.Sent
	}
	b.ReportMetric(float64(sent)/total.Seconds(), "messages/s")
}

// instant is a de-duplicating transport that delivers every message at
// once, sending nothing.
type instant struct{}

func (instant) Name() string       { return "webhook" }
func (instant) Deduplicates() bool { return true }
func (instant) Send(context.Context, transport.Delivery) (transport.Result, error) {
	return transport.Result{}, nil
}
