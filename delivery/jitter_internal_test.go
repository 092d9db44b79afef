package delivery

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Jitter's bounds hold across processes: three pacers on three pools (as
// three processes have) reserve 60 slots on one transport at once, and
// every gap between two slots is at least the interval (the floor, with
// the 2 % margin) and at most the interval plus the jitter; the gaps vary.
// The slots come from the database, so the check needs no waiting and no
// wall clock: reserving only queues slots into the future.
func TestJitterNeverGoesBelowTheFloorAcrossProcesses(t *testing.T) {
	t.Parallel()
	_, url := pgtest.NewPool(t)
	const interval, jitter = time.Second, time.Second
	var (
		mu    sync.Mutex
		slots []time.Time
		wg    sync.WaitGroup
	)
	for range 3 {
		pool, err := postgres.Open(context.Background(), url, "jitter-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		p := &pacer{pool: pool, transport: "webhook", interval: interval, jitter: jitter}
		wg.Go(func() {
			for range 20 {
				_, slot, err := p.reserve(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				slots = append(slots, slot)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(slots, func(a, b time.Time) int { return a.Compare(b) })
	floor := interval + interval/paceMargin
	ceiling := floor + jitter + jitter/paceMargin
	gaps := map[time.Duration]bool{}
	for i := 1; i < len(slots); i++ {
		gap := slots[i].Sub(slots[i-1])
		if gap < floor || gap > ceiling {
			t.Errorf("slots %d and %d are %s apart, want from %s to %s", i, i+1, gap, floor, ceiling)
		}
		gaps[gap.Round(10*time.Millisecond)] = true
	}
	if len(slots) != 60 || len(gaps) < 20 {
		t.Errorf("%d slots with %d distinct gaps (to 10 ms), want 60 slots whose gaps vary", len(slots), len(gaps))
	}
}

// Without jitter, the gaps are the interval's, as before.
func TestNoJitterKeepsTheInterval(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	p := &pacer{pool: pool, transport: "webhook", interval: time.Second}
	var prev time.Time
	for i := range 5 {
		_, slot, err := p.reserve(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if gap := slot.Sub(prev); i > 0 && gap != time.Second+time.Second/paceMargin {
			t.Errorf("gap %s, want the interval and its margin", gap)
		}
		prev = slot
	}
}

// The arithmetic queue-process logs at start: 300 over 09:00-21:00 is a
// send every 2 min 24 s on average; with a minute of jitter, the floor is
// 1 min 54 s; a floor of 10 minutes cannot spend 300 in 12 hours.
func TestPlanPace(t *testing.T) {
	t.Parallel()
	quiet, err := ParseQuietHours("21:00-09:00")
	if err != nil {
		t.Fatal(err)
	}
	p := PlanPace(time.Minute, time.Minute, quiet, 300, true)
	if p.Waking != 12*time.Hour || p.Interval != 114*time.Second || p.Needs != 12*time.Hour || !p.Fits {
		t.Errorf("spread: %+v", p)
	}
	if p := PlanPace(10*time.Minute, 0, quiet, 300, true); p.Interval != 10*time.Minute || p.Fits {
		t.Errorf("a floor above the spread: %+v, want the floor kept and does not fit", p)
	}
	if p := PlanPace(500*time.Millisecond, 0, QuietHours{}, 300, false); p.Interval != 500*time.Millisecond || !p.Fits ||
		p.Needs != 150*time.Second {
		t.Errorf("unspread: %+v", p)
	}
}

// A send may start as late after its slot as the slots' own margin allows
// when that is wider than maxLate: at --send-interval 1h, 72 s. Held to
// 20 ms, a loaded machine's scheduling let the first slot go and took the
// next, an hour on.
func TestASendMayBeAsLateAsTheSlotsMargin(t *testing.T) {
	for _, c := range []struct{ interval, want time.Duration }{
		{12500 * time.Microsecond, maxLate}, {time.Second, maxLate}, {time.Minute, 1200 * time.Millisecond}, {time.Hour, 72 * time.Second},
	} {
		if got := (&pacer{interval: c.interval}).lateness(); got != c.want {
			t.Errorf("interval %s: a send may start %s late; want %s", c.interval, got, c.want)
		}
	}
}
