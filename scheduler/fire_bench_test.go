package scheduler_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// fireConns is how many bot connections fire at once.
const fireConns = 8

// firesPerConn is how many users each connection moves, per iteration.
const firesPerConn = 400

// BenchmarkFire: the bot's engagement_fire (user_message on users the
// daily job is also walking: the activity recorded under the row's lock,
// nothing logged from active) from 8 connections at once, while
// engagement-daily runs on the same database, beside its reference: a
// plain single-row UPDATE of the same row's last_activity_at, from the same
// connections, interleaved call by call. Users: BENCH_USERS (default
// 200,000). Reports each one's median and p99 latency, and their p99
// ratio (issue 32's goal: within 2x).
func BenchmarkFire(b *testing.B) {
	users := benchUsers(b)
	src := benchSource(b, users)
	ctx := context.Background()
	var fire, plain []time.Duration
	b.StopTimer()
	for range b.N {
		pool := benchCopy(b, src, "engagement_bench_fire")
		ids := fixture.Users(b, pool, fixture.Pick{State: "active", Max: fireConns * firesPerConn})
		if len(ids) < fireConns*firesPerConn {
			b.Fatalf("%d active users, want %d", len(ids), fireConns*firesPerConn)
		}
		b.StartTimer()
		daily := make(chan error, 1)
		go func() {
			_, err := scheduler.RunDaily(ctx, pool, scheduler.Config{AsOf: benchAsOf})
			daily <- err
		}()
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			errs = make(chan error, fireConns)
		)
		for c := range fireConns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := pool.Acquire(ctx)
				if err != nil {
					errs <- err
					return
				}
				defer conn.Release()
				var f, p []time.Duration
				for _, id := range ids[c*firesPerConn : (c+1)*firesPerConn] {
					at := benchAsOf.Add(-time.Minute)
					t0 := time.Now()
					if _, err := activity.Fire(ctx, conn, id, sm.UserMessage, activity.FireOptions{At: at}); err != nil {
						errs <- err
						return
					}
					f = append(f, time.Since(t0))
					t0 = time.Now()
					if err := fixture.TouchUser(ctx, conn, id, at); err != nil {
						errs <- err
						return
					}
					p = append(p, time.Since(t0))
				}
				mu.Lock()
				fire, plain = append(fire, f...), append(plain, p...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		if err := <-daily; err != nil {
			b.Fatalf("the daily job beside the bot: %v", err)
		}
		b.StopTimer()
		pool.Close()
	}
	reportLatencies(b, "fire", fire, "update", plain)
}

// reportLatencies reports the median and p99 of a call and of its
// reference, in milliseconds, named after each, and their p99 ratio.
func reportLatencies(b *testing.B, name string, calls []time.Duration, refName string, ref []time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	c50, c99 := quantiles(calls)
	r50, r99 := quantiles(ref)
	b.ReportMetric(ms(c50), name+"-p50-ms")
	b.ReportMetric(ms(c99), name+"-p99-ms")
	b.ReportMetric(ms(r50), refName+"-p50-ms")
	b.ReportMetric(ms(r99), refName+"-p99-ms")
	b.ReportMetric(float64(c99)/float64(r99), "p99-ratio")
}

// quantiles returns the median and the 99th percentile of ds.
func quantiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}
