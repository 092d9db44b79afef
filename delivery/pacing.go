package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// pacer keeps the sends on one transport at least interval apart at their
// starts, across every process: each send first reserves a slot in the
// transport's row of engagement_transport_pacing (pace.sql) and waits for
// it. Reserving is one short statement; no lock or transaction is held
// while waiting or sending, so a paced process keeps up to Workers sends in
// flight, and the rate is the interval's, whatever the receiver's latency.
// Each transport has its own row, so one transport never slows another.
//
// The pace is a floor (issue 59): a request starts no sooner than its
// slot and no later than PaceTolerance after it, as this process's clock
// places the slot, and the "no later" is decided at the last moment the
// process controls: inside the connection's write, right before the
// request's first byte (transport.StartGate). What comes between the
// wait and the request (the send-time recheck, the start's statement, a
// database connection awaited, a dial, a descheduled goroutine) is done
// ahead of the slot, lead before it, a lead learned from how long it took
// the sends before; a send that reaches its write more than PaceTolerance
// after its slot is not started: the slot is let go (a gap in the pace)
// and the message takes a fresh one. A busy machine makes the pace
// slower, never faster.
//
// Slots are spaced 2% wider than the interval: slots are interval × (1 +
// 1/paceMargin) apart, so R slots of a rate of R per second span a second
// plus PaceTolerance, and two starts are at least the interval less
// PaceTolerance apart.
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
	db        dbClock
	// lead is how long before its slot a send wakes to do what comes
	// before its request (learn); missed counts the slots let go.
	lead   atomic.Int64
	missed atomic.Int64
}

// paceMargin: slots are interval + interval/paceMargin apart.
const paceMargin = 50

// PaceTolerance is the most a request starts after its slot, as the
// sending process's clock places the slot: two requests on one transport
// start at least the interval less it apart (docs/delivery.md, "Pacing: a
// shared rate"). The margin's share of a second.
const PaceTolerance = time.Second / paceMargin

// startWindow is how late after its slot a request may start: half the
// tolerance; the other half is for the way to the receiver (the write,
// the network, the receiver's own scheduling), which a busy machine
// stretches for one request and not the next.
const startWindow = PaceTolerance / 2

// maxLead bounds how long before its slot a send does its send-time
// recheck and its start: the check is that much older at the request, at
// most.
const maxLead = 100 * time.Millisecond

// errNoSlotInTime is wait's answer when the slot it reserved comes after
// the time it was given: the slot is let go (a gap in the pace).
var errNoSlotInTime = errors.New("the next send slot comes after the run's deadline")

// errLateStart is the StartGate's refusal: the request would start more
// than PaceTolerance after its slot. Nothing of it was written.
var errLateStart = errors.New("the request would start too late for its send slot")

// slot is a reserved send slot on this process's clock: a request starts
// no sooner than earliest and no later than latest.
type slot struct {
	earliest, latest time.Time
	wake             time.Time // when the send woke for it: earliest less the lead
}

// wait reserves the next slot and waits until lead before it, or until
// ctx ends. A slot after notAfter (not zero) is not waited for:
// errNoSlotInTime.
func (p *pacer) wait(ctx context.Context, notAfter time.Time) (slot, error) {
	s, err := p.reserve(ctx)
	if err != nil {
		return slot{}, err
	}
	if !notAfter.IsZero() && s.earliest.After(notAfter) {
		return slot{}, errNoSlotInTime
	}
	s.wake = s.earliest.Add(-time.Duration(p.lead.Load()))
	if !sleep(ctx, time.Until(s.wake)) {
		return slot{}, ctx.Err()
	}
	return s, nil
}

// late reports whether s is missed already at now: the send lets it go.
func (p *pacer) late(s slot, now time.Time) bool {
	if now.After(s.latest) {
		p.learn(s, now)
		p.missed.Add(1)
		return true
	}
	return false
}

// gate is the StartGate of a send in slot s: it waits for the slot, if
// the request is early, and refuses it after s.latest (errLateStart).
func (p *pacer) gate(s slot) transport.StartGate {
	return func(now time.Time) (time.Time, error) {
		p.learn(s, now)
		now = until(s.earliest, now)
		if now.After(s.latest) {
			p.missed.Add(1)
			return now, errLateStart
		}
		return now, nil
	}
}

// until waits from now until t and returns the time it ends.
func until(t, now time.Time) time.Time {
	if d := t.Sub(now); d > 0 {
		time.Sleep(d)
		return time.Now()
	}
	return now
}

// learn moves the lead toward what the send in s needed: from its wake to
// its request (now), with a quarter more and a millisecond; up at once,
// down an eighth of the way a send, never above maxLead.
func (p *pacer) learn(s slot, now time.Time) {
	lead := time.Duration(p.lead.Load())
	need := now.Sub(s.wake) // the path from its planned wake: the timer's own lateness too
	need += need/4 + time.Millisecond
	switch {
	case need > lead:
		lead = need
	default:
		lead -= (lead - need) / 8
	}
	p.lead.Store(int64(min(max(lead, 0), maxLead)))
}

// reserve takes the next slot (pace.sql) and places it on this process's
// clock (dbClock).
func (p *pacer) reserve(ctx context.Context) (slot, error) {
	sent := time.Now()
	row, err := p.reserveRow(ctx)
	if err != nil {
		return slot{}, err
	}
	offset, uncertain := p.db.observe(sent, time.Now(), row.DbNow)
	at := row.Slot.Add(-offset)
	s := slot{earliest: at.Add(uncertain), latest: at.Add(startWindow - uncertain)}
	if s.latest.Sub(s.earliest) < startWindow/2 {
		// The clocks are known too loosely (no answer came back within
		// startWindow/2): starts keep within half the window of the
		// estimate, rather than never start.
		s.latest = s.earliest.Add(startWindow / 2)
	}
	return s, nil
}

// reserveRow takes the next slot (pace.sql), on the database's clock.
func (p *pacer) reserveRow(ctx context.Context) (paceRow, error) {
	// A reservation lost to a crash only leaves a gap, so its commit need
	// not wait for the disk.
	var row paceRow
	b := &pgx.Batch{}
	b.Queue(lazyCommitSQL)
	paceQuery.QueueOne(b, paceArgs{Interval: p.interval + p.interval/paceMargin, Jitter: p.jitter + p.jitter/paceMargin,
		Transport: p.transport}, &row)
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return paceRow{}, fmt.Errorf("reserve a send slot: %w", err)
	}
	return row, nil
}

// driftPerSecond bounds how far two clocks drift apart in a second
// (500 ppm, the most NTP slews a clock).
const driftPerSecond = 2000

// dbClock places the database's instants on this process's clock: the
// offset between the two, from the reservation that came back fastest
// (NTP's way: the database read its clock between the request and the
// answer, so the offset is known to half the round trip), that bound
// growing with the sample's age by the most two clocks drift apart.
type dbClock struct {
	mu        sync.Mutex
	set       bool
	offset    time.Duration // the database's clock less this process's
	uncertain time.Duration // half the sample's round trip
	at        time.Time     // when the sample was taken
}

// observe takes a sample (a statement sent at sent, answered at
// answered, that read db on the database's clock) and returns the offset
// and how far off it may be.
func (c *dbClock) observe(sent, answered, db time.Time) (time.Duration, time.Duration) {
	half := answered.Sub(sent) / 2
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.uncertain + answered.Sub(c.at)/driftPerSecond
	if !c.set || half <= held {
		c.set, c.offset, c.uncertain, c.at = true, db.Sub(sent.Add(half)), half, answered
		return c.offset, half
	}
	return c.offset, held
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
