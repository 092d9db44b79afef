package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pacer keeps the sends on one transport at least interval apart at their
// starts, across every process: each send first reserves a slot in the
// transport's row of engagement_transport_pacing (pace.sql) and waits for
// it. Reserving is one short statement; no lock or transaction is held
// while waiting or sending, so a paced process keeps up to Workers sends in
// flight, and the rate is the interval's, whatever the receiver's latency.
// Each transport has its own row, so one transport never slows another.
//
// Slots are spaced 2% wider than the interval: a send starts when its
// slot's wait ends in its own process, a few milliseconds of scheduling and
// network jitter later, and the margin keeps two starts at least the
// interval apart at the receiver, and any second there at most at the rate.
//
// With jitter, each gap is the interval plus a random part of jitter,
// drawn in the statement that reserves the slot: never below the interval
// (the floor), across every process, and never the same twice in a row
// but by chance, so the sends do not tick like a machine's.
type pacer struct {
	pool      *pgxpool.Pool
	transport string
	interval  time.Duration
	jitter    time.Duration
}

// paceMargin: slots are interval + interval/paceMargin apart.
const paceMargin = 50

// maxLateTries bounds how often a late process takes a fresh slot before it
// sends anyway.
const maxLateTries = 3

// maxLate is how late after its slot a send may still start: the margin's
// share of a second. Slots are interval × (1 + 1/paceMargin) apart, so R
// slots of a rate of R per second span a second plus this; a start no later
// than this after its slot keeps every second at the receiver at most at
// the rate.
const maxLate = time.Second / paceMargin

// lateness is how late after its slot a send may still start: maxLate,
// or the slots' own margin (interval/paceMargin) when that is wider. A
// start that late still comes at least the interval after the slot before
// it, and with an interval of a second or more no second holds two. With
// maxLate alone, a run at --send-interval 1h on a loaded machine, woken
// 20 ms after a slot it did not even sleep for, let the slot go and took
// the next, an hour on: nothing was sent (issue 60's suite run;
// TestMaxDurationEndsAPacedWait).
func (p *pacer) lateness() time.Duration { return max(maxLate, p.interval/paceMargin) }

// errNoSlotInTime is wait's answer when the slot it reserved comes after
// the time it was given: the slot is let go (a gap in the pace).
var errNoSlotInTime = errors.New("the next send slot comes after the run's deadline")

// wait reserves the next slot and waits for it, or until ctx ends. A
// process that wakes more than lateness after its slot (a loaded machine, a
// long pause) does not send late, right behind the next slot's sender: it
// lets the slot go and takes a fresh one. So no second holds more starts
// than the rate, and two starts are at least the interval less maxLate
// apart. A slot after notAfter (not zero) is not waited for:
// errNoSlotInTime.
func (p *pacer) wait(ctx context.Context, notAfter time.Time) error {
	for try := 1; ; try++ {
		delay, _, err := p.reserve(ctx)
		if err != nil {
			return err
		}
		// How late the wait ended, past the delay counted from the
		// answer: the machine's scheduling, not the database's round trip
		// (a slow answer is not held against the slot).
		answered := time.Now()
		if !notAfter.IsZero() && answered.Add(delay).After(notAfter) {
			return errNoSlotInTime
		}
		if !sleep(ctx, delay) {
			return ctx.Err()
		}
		late := time.Since(answered) - delay
		if late <= p.lateness() || try == maxLateTries {
			return nil
		}
	}
}

// reserve takes the next slot (pace.sql) and returns how long until it,
// and the slot.
func (p *pacer) reserve(ctx context.Context) (time.Duration, time.Time, error) {
	// A reservation lost to a crash only leaves a gap, so its commit need
	// not wait for the disk.
	var slot paceRow
	b := &pgx.Batch{}
	b.Queue(lazyCommitSQL)
	paceQuery.QueueOne(b, paceArgs{Interval: p.interval + p.interval/paceMargin, Jitter: p.jitter + p.jitter/paceMargin,
		Transport: p.transport}, &slot)
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, time.Time{}, fmt.Errorf("reserve a send slot: %w", err)
	}
	return slot.Delay, slot.Slot, nil
}

// sleep waits d or until ctx is done, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
