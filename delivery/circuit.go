package delivery

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// OutageStreak is how many different messages in a row a gateway must
// answer 502, 503 or 504 before the run takes it for an outage.
const OutageStreak = 3

// circuit stops a run when the receiver as a whole is down, so that an
// outage (the bot being redeployed, a gateway with nothing behind it) costs
// the messages nothing: they go back to the queue with their retries
// unspent, and a later run delivers them.
//
//   - A receiver that cannot be reached (the request could not even be
//     written: connection refused, no such host) is an outage at once.
//   - A 502, 503 or 504 may be one message's bad luck: the message is held,
//     its outcome not yet recorded. When OutageStreak different messages
//     in a row got one, the circuit opens and every held message is
//     released unspent; when any other answer comes first, the held
//     messages are recorded as the ordinary failures they were.
//
// An answer that leaves the message in doubt on a transport that cannot
// de-duplicate (a Cloud API 503) counts towards the streak, but its message
// is never released: it is recorded by its own rule, outcome unknown.
//
// Once open, the circuit stays open for the rest of the run: the workers
// claim nothing more and start no send, and what they still hold is
// released.
type circuit struct {
	mu     sync.Mutex
	held   []heldSend // gateway failures in a row, not yet recorded
	streak int        // gateway failures in a row, of different messages
	reason string     // why the circuit opened; "" while closed
}

// heldSend is a failed attempt the circuit keeps until it knows whether it
// was the message's failure or the receiver's outage.
type heldSend struct {
	m        claimed
	err      error
	latency  time.Duration
	answered time.Time // when the transport answered
}

// verdict is what the circuit says to do with an attempt.
type verdict int

const (
	record  verdict = iota // record the outcome as it is
	hold                   // the circuit keeps it, to be recorded or released later
	release                // hand the message back, its retry unspent
)

// observe takes an attempt's result and says what to do with its message.
// resendable is false when the message must not be sent again whatever
// happens (an outcome in doubt on a transport that cannot de-duplicate).
// When the attempt settles the streak, resolved lists the held attempts:
// to release when the circuit just opened (opened is then its reason), to
// record as the failures they were otherwise.
func (c *circuit) observe(m claimed, sendErr error, latency time.Duration, answered time.Time, resendable bool) (v verdict, resolved []heldSend, opened string) {
	var terr *transport.Error
	outage := errors.As(sendErr, &terr) && terr.Outage()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.reason != "":
		if outage && resendable {
			return release, nil, ""
		}
		return record, nil, ""
	case !outage:
		resolved, c.held, c.streak = c.held, nil, 0
		return record, resolved, ""
	case terr.Unreachable: // never written, so always resendable
		c.reason = "the receiver could not be reached"
		resolved, c.held = c.held, nil
		return release, resolved, c.reason
	}
	c.streak++
	v = hold
	if !resendable {
		v = record
	}
	if c.streak < OutageStreak {
		if v == hold {
			c.held = append(c.held, heldSend{m, sendErr, latency, answered})
		}
		return v, nil, ""
	}
	c.reason = fmt.Sprintf("the receiver answered HTTP %d to %d different messages in a row", terr.StatusCode, c.streak)
	resolved, c.held = c.held, nil
	if v == hold {
		v = release
	}
	return v, resolved, c.reason
}

// open reports why the circuit opened, or "" while it is closed.
func (c *circuit) open() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// drain returns what the circuit still holds as the run ends: failures no
// later answer confirmed or refuted, to record as they were.
func (c *circuit) drain() []heldSend {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.held
	c.held, c.streak = nil, 0
	return held
}
