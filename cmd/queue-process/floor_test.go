package main_test

import (
	"context"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The floor of the pace (issue 59): on a busy machine three processes at
// 100 ms sent two requests 0 to 1 ms apart, 45 to 76 of 299 gaps under
// the documented floor, the interval less 20 ms. Each send waited for its
// slot, then for the check before the send, a database round trip, and
// whatever the machine's scheduling added: a late send went right behind
// the next slot's. Beside two CPU burners and a database kept busy, over
// 300 gaps, no two requests may arrive closer than the floor. The bot
// (newBot) stamps a request with the kernel's time of its bytes' arrival
// (SO_TIMESTAMPNS, package arrivals), not its handler's, which on a machine
// this busy runs up to 200 ms late and would see a burst where the
// requests were apart.
//
// At 50 ms, not the 100 ms: the gate serves every interval over
// its 20 ms tolerance, and 310 sends at 100 ms kept the two burners
// running for 36 s of the suite (issue 60). At 50 ms the floor is 30 ms,
// and without the gate the same run still sends requests closer than it.
func TestPaceIsAFloorAcrossThreeProcessesUnderLoad(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	b := newBot(t, false)
	const messages, interval, tolerance = 310, 50 * time.Millisecond, 20 * time.Millisecond
	queueMessages(t, pool, messages)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL)

	// The load: two CPU burners and a connection keeping PostgreSQL busy.
	for range 2 {
		burner := exec.Command("sh", "-c", "while :; do :; done")
		if err := burner.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = burner.Process.Kill(); _ = burner.Wait() })
	}
	ctx, stopLoad := context.WithCancel(context.Background())
	var load sync.WaitGroup
	load.Go(func() {
		for ctx.Err() == nil {
			_ = fixture.LoadServer(ctx, pool, 200000)
		}
	})
	defer load.Wait()
	defer stopLoad()

	var wg sync.WaitGroup
	results := make([]cmdtest.Result, 3)
	for i := range results {
		wg.Go(func() {
			results[i] = cmdtest.Run(t, bin, env, "--send-interval", interval.String(), "--max-duration", "50s", "--output", "json")
		})
	}
	wg.Wait()
	stopLoad()
	sent := 0
	for _, res := range results {
		sent += queueSummary(t, res).Sent
	}
	times, keys := b.received()
	if len(keys) != sent || len(slices.Compact(slices.Sorted(slices.Values(keys)))) != len(keys) {
		t.Errorf("the processes sent %d and the bot got %d requests of %d messages", sent, len(keys),
			len(slices.Compact(slices.Sorted(slices.Values(keys)))))
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	if len(times) < 301 {
		t.Fatalf("the bot got %d requests, want at least 301 (300 gaps)", len(times))
	}
	least, under := time.Duration(1<<62), 0
	for i := 1; i < len(times); i++ {
		gap := times[i].Sub(times[i-1])
		least = min(least, gap)
		if gap < interval-tolerance {
			under++
		}
	}
	t.Logf("%d gaps at %s: the least %s, %d under the floor (%s)", len(times)-1, interval, least, under, interval-tolerance)
	if under > 0 {
		for i := 1; i < len(times); i++ {
			if times[i].Sub(times[i-1]) < interval-tolerance {
				t.Logf("under at %s: %s", times[i].Format("15:04:05.000000"), times[i].Sub(times[i-1]))
			}
		}
		t.Errorf("%d of %d gaps under the floor, the interval less %s; the least %s", under, len(times)-1, tolerance, least)
	}
}
