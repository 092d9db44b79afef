package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The send-time checks run when a message is claimed (claim.sql, which
// cancels what is no longer wanted and defers what is due in the quiet
// hours) and again before its send starts, whenever the claim's check has
// grown old (recheck.sql, the same rules): a claimed batch is sent one
// message after another, and its last send may start seconds after the
// claim; in that time the user may answer the goodbye, come back or opt out
// (issue 42: unpaced, 482 of 7,835 goodbyes went to users who had answered
// up to 6 s before).
//
// Paced, a send waits for its slot anyway, and each message is checked
// alone, after the wait, right before its send. Unpaced, one statement per
// send would cost the rate the batching buys (every statement is parsed and
// planned anew, on connections the workers share: a check per send cut the
// rate to a fifth, one per 25 sends to about two thirds), so the claim
// counts as the batch's check, and a message about to be sent when the
// last check is older than RecheckAge is checked again with the rest of
// the batch: a message's send starts at most RecheckAge after its user was
// last read. A batch sent within RecheckAge of its claim costs nothing
// more; a slower one one statement per RecheckAge per worker. An opt-out
// or an erase (a wish) reaches a claimed message sooner, within WishBound
// (250 ms) of its commit: a message whose user has a wish read since the
// batch's last check is checked again with the rest of the batch
// (wishes.go).
const RecheckAge = time.Second

// sendCheck re-checks one claimed batch's messages, in the order they are
// sent.
type sendCheck struct {
	run   *run
	batch []claimed
	// batch[from:to] were checked at (the statement was sent then: the
	// users were read after it, so a check is never younger than it says).
	from, to int
	at       time.Time
	// started is when the newest check's statement was sent, on the
	// wall clock (at is on the run's, a test's own in a simulation).
	started   time.Time
	cancelled map[string]string // id → cancel_reason, of every check so far
	// doubted: messages in doubt found no longer wanted (id → why), not
	// cancelled by the check: resolveDoubt asks the receiver first.
	doubted map[string]string
}

// sendCheck starts the checks of batch, claimed by the statement sent at
// claimedAt: unpaced, that claim is its first check.
func (r *run) sendCheck(batch []claimed, claimedAt time.Time) *sendCheck {
	c := &sendCheck{run: r, batch: batch, cancelled: map[string]string{}, doubted: map[string]string{}}
	if r.pacer == nil {
		c.to, c.at = len(batch), claimedAt
	}
	return c
}

// cancelReason reports why batch[i] is no longer wanted ("" when it still
// is), checking it again first unless a check young enough covered it.
// A message it reports is cancelled already, counted and its budget slot
// given back, unless doubted: a message in doubt is not cancelled by the
// check, and is left to resolveDoubt. Either way it must not be sent.
func (c *sendCheck) cancelReason(ctx context.Context, i int) (reason string, doubted bool, err error) {
	if c.run.recheckAge < 0 {
		return "", false, nil // a benchmark's reference: the claim's check alone
	}
	again := i < c.from || i >= c.to || c.run.clock().Sub(c.at) > c.run.recheckAge
	if !again && c.run.wishes != nil {
		// Unpaced, within RecheckAge of the last check: again only when
		// the user has a wish read since (wishes.go).
		wished, err := c.run.wishes.wishedSince(ctx, c.batch[i].UserID, c.at)
		if err != nil {
			return "", false, err
		}
		again = wished
	}
	if again {
		if err := c.check(ctx, i); err != nil {
			return "", false, err
		}
	}
	id := c.batch[i].ID
	if why, ok := c.doubted[id]; ok {
		return why, true, nil
	}
	return c.cancelled[id], false, nil
}

// writeBy is the latest a paced request for batch[i] may start, which its
// check just cleared (zero for an unpaced one: wishes.go bounds those):
// WishBound after the check's statement was sent. That statement read the
// user as they were when it started; a wish that committed after it is
// not in what it read, and a request later than WishBound after the
// check could come later than WishBound after that wish (305 ms on a
// busy machine, in CI). A check that old is done again before the request
// (send); a write later than writeBy is refused, and the message goes
// back to the queue unsent, due as it was, to be checked again when
// claimed (errCheckTooOld).
func (c *sendCheck) writeBy(i int) time.Time {
	if c.run.pacer == nil || c.run.recheckAge < 0 || i < c.from || i >= c.to || c.started.IsZero() {
		return time.Time{}
	}
	return c.started.Add(WishBound)
}

// expire makes the next cancelReason check its message again, however
// young the last check.
func (c *sendCheck) expire() { c.from, c.to = 0, 0 }

// errCheckTooOld is a paced send's answer when its request could not start
// within WishBound of its check (writeBy). Nothing of it was written.
var errCheckTooOld = errors.New("the request could not start within WishBound of its check")

// check runs recheck.sql for batch[i] (paced) or the rest of the batch
// from it (unpaced).
func (c *sendCheck) check(ctx context.Context, i int) error {
	end := len(c.batch)
	if c.run.pacer != nil {
		end = i + 1
	}
	ids := make([]string, 0, end-i)
	for _, m := range c.batch[i:end] {
		ids = append(ids, m.ID)
	}
	at, started := c.run.clock(), time.Now()
	var gone map[string]string
	err := c.run.onServer(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		gone = map[string]string{}
		return recheckQuery.Each(ctx, conn, recheckArgs{Kinds: sendRules, IDs: ids, Holder: c.run.holder,
			ClockOffset: c.run.cfg.ClockOffset, ReachoutWindow: c.run.reachoutWindow()}, func(r *recheckRow) error {
			if r.Cancelled {
				gone[r.ID] = r.CancelReason
			} else {
				c.doubted[r.ID] = r.CancelReason
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("check messages again before their send: %w", err)
	}
	// A message cancelled by an earlier check is no longer held, so a
	// later one does not return it: the reasons add up.
	c.from, c.to, c.at, c.started = i, end, at, started
	if len(gone) == 0 {
		return nil
	}
	var ms []claimed
	var cancelledIDs []string
	for _, m := range c.batch[i:end] {
		if reason, ok := gone[m.ID]; ok {
			c.cancelled[m.ID] = reason
			ms, cancelledIDs = append(ms, m), append(cancelledIDs, m.ID)
			c.run.tally.cancel(reason)
			log := c.run.messageLog(m)
			log.Info().Str("cancel_reason", reason).Msg("no longer wanted when about to be sent; cancelled")
		}
	}
	c.run.refund(cancelledIDs, ms)
	return nil
}
