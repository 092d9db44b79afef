package delivery

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/singleflight"
)

// run is one Run's state: what it counts, the lease it holds, its circuit,
// and what it read at its start (Meta's verdict, the routes, the ceiling,
// the budget, the pace as planned). Each Run makes a new one, so nothing
// of a run outlives it or leaks into the next; its workers share it. The
// configuration it works by is the Processor's, embedded, which a run
// never changes.
type run struct {
	*Processor

	tally   *tally
	lease   *lease
	circuit *circuit
	pauses  *pauseState             // the transport's pause, once the run met one
	stop    context.CancelCauseFunc // stops the run's workers, with why
	wishes  *wishes                 // the run's view of the wishes; nil paced, without, or until startWishes

	pacer   *pacer        // the run's pace: the Processor's, its interval raised to the ceiling's (floorPace); nil without pacing
	plan    Pace          // the run's pace, as pace() worked it out
	verdict metaVerdict   // Meta's verdict the claim applies
	health  *NumberHealth // Meta's verdict as the run read it; nil on other transports
	routes  routes        // the templates' categories the run routes by (categories.go)
	// throughput is the run's ceiling as read, throttle its limit on the
	// requests' rate (throughput.go); nil on other transports.
	throughput *Throughput
	throttle   *throttle
	budget     *budget // the run's send budget; nil without one
	// recovering lets the workers that run out of work at once share one
	// recovery (recover.sql) instead of each scanning the claims in flight.
	recovering singleflight.Group
	// noSlotInTime is set when a paced send's slot came after the run's
	// deadline: the run stops as at its deadline.
	noSlotInTime atomic.Bool
}

// newRun starts a run of p; stop ends its workers.
func (p *Processor) newRun(stop context.CancelCauseFunc) *run {
	r := &run{
		Processor: p,
		tally:     &tally{},
		lease:     &lease{timeout: p.cfg.ClaimTimeout},
		circuit:   &circuit{},
		pauses:    &pauseState{},
		stop:      stop,
	}
	if p.pace != nil {
		pace := *p.pace
		r.pacer = &pace
	}
	return r
}

// turn is what one message's turn (deliver) came to: the outcome to
// record, or why there is none.
type turn struct {
	end     turnEnd
	outcome *outcome // endRecord's: an attempt's, or a failure or a repeat recorded without one
}

// turnEnd is how a turn ended.
type turnEnd uint8

const (
	// goOn: not ended; deliver goes on to its next step. A step that
	// fails returns it with its error.
	goOn turnEnd = iota
	// endRecord: the outcome is to be recorded (the turn's outcome).
	endRecord
	// endCancelled: no longer wanted, cancelled unsent (the check before
	// the send, the route, a message in doubt the receiver never had).
	endCancelled
	// endHandedBack: back in the queue unsent, its retries unspent: the
	// run is stopping, the account is paused, no slot comes before the
	// deadline, the receiver is down.
	endHandedBack
	// endHeld: the answer is held by the circuit, which settles it once
	// it knows whether the receiver is down (circuit.go).
	endHeld
	// endClaimLost: another holder has the message now; left to it.
	endClaimLost
)

// toRecord ends a turn with o to record.
func toRecord(o outcome) turn { return turn{end: endRecord, outcome: &o} }

// ended ends a turn with nothing to record, and err if what it did to end
// it (a release, a cancel) failed.
func ended(end turnEnd, err error) (turn, error) { return turn{end: end}, err }
