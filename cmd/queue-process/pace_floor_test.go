package main_test

import (
	"context"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
)

// Issue 59: paced sends bunched up on a busy machine. At --send-interval
// 500ms with 3 processes, requests arrived 281–290 ms apart (69 of 299
// gaps under 500 ms, 31–39 under the documented "interval less 20 ms"),
// and the held-out pacing tests failed at load 12 (32 ms apart under a 50
// ms interval): the slot was taken before the send-time recheck and the
// request, and whatever came between (a slow recheck, a connection
// awaited, a descheduled process) was not held against it.
//
// Three queue-process binaries share one pace of 100 ms over 300 sends,
// beside two CPU burners and two connections keeping the database busy,
// all started by the test: no two requests may arrive closer than the
// interval less delivery.PaceTolerance. It is not parallel, so that the
// load it makes does not slow the package's other tests (and theirs does
// not add to its own): it runs alone, about 35 s.
func TestPaceIsAFloorAcrossThreeProcessesUnderLoad(t *testing.T) {
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	bot := webhooktest.New(t)
	const (
		sends    = 300
		interval = 100 * time.Millisecond
	)
	fixture.DueReviews(t, pool, sends, "floor-")
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL)

	busyMachine(t, url)
	var wg sync.WaitGroup
	results := make([]cmdtest.Result, 3)
	for i := range results {
		wg.Go(func() {
			results[i] = cmdtest.Run(t, bin, env, "--send-interval", interval.String(), "--output", "json")
		})
	}
	wg.Wait()
	for i, res := range results {
		if res.Code != 0 {
			t.Fatalf("process %d: exit %d: %s", i, res.Code, res.Stderr)
		}
	}
	reqs := bot.Requests()

	if len(reqs) != sends {
		t.Fatalf("the bot got %d requests, want %d", len(reqs), sends)
	}
	at := make([]time.Time, len(reqs))
	for i, r := range reqs {
		at[i] = r.At
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	least, under, closest := floorGaps(at, interval-delivery.PaceTolerance)
	t.Logf("%d requests over %s: least gap %s (at %d), %d under %s", len(at), at[len(at)-1].Sub(at[0]),
		least, closest, under, interval-delivery.PaceTolerance)
	if under > 0 {
		t.Errorf("%d of %d gaps between arrivals under the interval %s less the tolerance %s; the least %s (sends %d and %d)",
			under, len(at)-1, interval, delivery.PaceTolerance, least, closest, closest+1)
	}
	// And no second holds more starts than the rate allows, with its
	// tolerance: a window of one second less the tolerance holds at most
	// one second's worth.
	perSecond := int(time.Second / interval)
	for i := range at {
		j := i
		for j < len(at) && at[j].Sub(at[i]) < time.Second-delivery.PaceTolerance {
			j++
		}
		if j-i > perSecond {
			t.Errorf("%d requests arrived within %s from send %d, want at most %d", j-i, at[j-1].Sub(at[i]), i+1, perSecond)
			break
		}
	}
}

// floorGaps returns the least gap between consecutive arrivals, the index
// of the first of its pair, and how many gaps are under floor.
func floorGaps(at []time.Time, floor time.Duration) (least time.Duration, under, closest int) {
	least = time.Hour
	for i := 1; i < len(at); i++ {
		gap := at[i].Sub(at[i-1])
		if gap < least {
			least, closest = gap, i-1
		}
		if gap < floor {
			under++
		}
	}
	return least, under, closest
}

// busyMachine loads the machine until the test ends, as issue 59 measured
// it: two CPU burners (processes of their own, like anything else on the
// host) and two connections keeping PostgreSQL busy with a loop of
// queries.
func busyMachine(t *testing.T, url string) {
	t.Helper()
	for range 2 {
		burner := exec.Command("sh", "-c", "while :; do :; done")
		if err := burner.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = burner.Process.Kill()
			_ = burner.Wait()
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for range 2 {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer conn.Close(context.Background())
			for ctx.Err() == nil {
				// About 20 ms of one core a query, round after round.
				_, _ = conn.Exec(ctx, `SELECT count(*) FROM generate_series(1, 200000)`)
			}
		})
	}
}
