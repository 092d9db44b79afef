package activity_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
	"github.com/rs/zerolog"
)

// BenchmarkReceipt times engagement_receipt from 8 connections, as a
// bot's and Meta's receipts arrive side by side, while a delivery
// processor sends a backlog (as queue-process does), against the same number
// of primary-key UPDATEs of the same rows (the cheapest write a receipt
// could be), alternating: median and p99 of each (make bench: 5,000,000
// messages of 1,000,000 users). The queue holds
// BENCH_MESSAGES sent messages (default 1,000,000) with provider ids, over
// BENCH_MESSAGES/5 users; each round applies a delivered receipt to
// 8 × 2,000 random messages, and the UPDATE touches 8 × 2,000 others.
func BenchmarkReceipt(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_MESSAGES")); err == nil && v > 0 {
		n = v
	}
	pool, url := pgtest.NewPool(b)
	ctx := context.Background()
	users := max(n/5, 1)
	fixture.NumberedUsers(b, pool, users)
	fixture.ActivitySentReviews(b, pool, n, users)
	fixture.VacuumQueue(b, pool)
	// queue-process's work meanwhile: a processor on a pool of its own
	// (the binaries' pool) delivering a backlog of due weekly reviews,
	// unpaced, through a local webhook, for as long as the rounds last.
	backlog := min(n/2, 500_000)
	fixture.ActivityDueReviews(b, pool, backlog, users)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	hook, err := transport.NewWebhook(transport.WebhookConfig{URL: srv.URL, Secret: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	senderPool, err := postgres.Open(ctx, url, "bench-sender")
	if err != nil {
		b.Fatal(err)
	}
	defer senderPool.Close()
	ids := fixture.ActivityIDsByNumber(b, pool, "k") // by message number, for the primary-key UPDATE
	const conns, per = 8, 2000
	at := time.Now().Add(-time.Hour)
	var receipts, updates []time.Duration
	round := 0
	p, err := delivery.NewProcessor(senderPool, delivery.ProcessorConfig{Transport: hook, SendInterval: -1, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	sendCtx, stopSending := context.WithCancel(ctx)
	sent := make(chan int, 1)
	go func() {
		sum, _ := p.Run(sendCtx)
		sent <- sum.Sent
	}()
	for b.Loop() {
		kinds := []string{"receipt", "update"}
		if round%2 == 1 { // alternating which goes first, beside the same delivery
			kinds[0], kinds[1] = kinds[1], kinds[0]
		}
		for _, kind := range kinds {
			var mu sync.Mutex
			var wg sync.WaitGroup
			for c := range conns {
				wg.Go(func() {
					lat := make([]time.Duration, 0, per)
					for i := range per {
						k := (round*conns*per*2+c*per+i)*7919%n + 1
						t0 := time.Now()
						var err error
						if kind == "receipt" {
							_, _, err = activity.Receipt(ctx, pool, fmt.Sprint("wamid.", k), activity.ReceiptDelivered, activity.ReceiptOptions{At: at})
						} else {
							err = fixture.ActivityDeliveredAt(ctx, pool, ids[k-1], at)
						}
						if err != nil {
							b.Error(err)
							return
						}
						lat = append(lat, time.Since(t0))
					}
					mu.Lock()
					if kind == "receipt" {
						receipts = append(receipts, lat...)
					} else {
						updates = append(updates, lat...)
					}
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		round++
	}
	stopSending()
	if <-sent == 0 {
		b.Error("the processor sent nothing while the receipts ran: the benchmark did not measure them beside delivery")
	}
	q := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(receipts, 0.5), "receipt-p50-ms")
	b.ReportMetric(q(receipts, 0.99), "receipt-p99-ms")
	b.ReportMetric(q(updates, 0.5), "update-p50-ms")
	b.ReportMetric(q(updates, 0.99), "update-p99-ms")
}
