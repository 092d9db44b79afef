package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// A message is in doubt when its request may have reached the receiver
// and nobody recorded what came of it: on a transport that de-duplicates
// (batched recording: no start is written before a send), a process
// killed mid-batch leaves every message it held so. Recovery puts such a
// message back in the queue with in_doubt set (recover.sql), its send
// budget slot kept: while it is still wanted it is sent again under its
// same idempotency key, which the receiver drops if it had it.
//
// One that is no longer wanted (its user answered, opted out, …) is
// where a crash used to lie: cancelled, it would say it was never sent
// although the user may have it, and give back a slot the send had used
// (issue 55: 91 users reached under a limit of 60, 31 of their messages
// recorded cancelled). The checks never cancel it (claim.sql,
// recheck.sql); resolveDoubt asks the receiver instead, sending nothing.

// resolveDoubt settles m, in doubt and no longer wanted (reason): the
// receiver had it → sent, as it was; the receiver did not → cancelled
// with reason, its slot given back (the lookup spent its key at the
// receiver, so the lost request cannot go out later); the receiver cannot
// say, or the transport cannot be asked → failed, outcome unknown, in
// doubt still, never sent again; the receiver is down or busy → asked
// again later, as a failed send is retried. Nothing is sent to the user,
// whatever the answer.
func (r *run) resolveDoubt(ctx context.Context, m claimed, reason string) (turn, error) {
	if err := ctx.Err(); err != nil {
		return r.notStarted(ctx, m, err) // stopping: back in the queue, in doubt still
	}
	log := r.messageLog(m).With().Str("unwanted", reason).Logger()
	looker, ok := r.cfg.Transport.(transport.Looker)
	if !ok {
		return toRecord(r.doubtUnresolved(m, reason, fmt.Errorf("%s cannot be asked", r.cfg.Transport.Name()))), nil
	}
	marks, err := r.markLookup(m)
	if err != nil {
		return r.notStarted(ctx, m, fmt.Errorf("note a lookup: %w", err))
	}
	if len(marks) == 0 {
		r.tally.claimsLost.Add(1)
		log.Warn().Msg("claim lost before a message in doubt was looked up; left to its new holder")
		return ended(endClaimLost, nil)
	}
	start := time.Now()
	answer, err := looker.Lookup(ctx, m.Delivery)
	var terr *transport.Error
	switch {
	case err != nil && ctx.Err() != nil:
		return r.notStarted(ctx, m, err)
	case errors.As(err, &terr) && !terr.Permanent:
		// The receiver is down or busy (unreachable, a 5xx, 425 while it
		// sends that very key): as for a send, an outage stops the run
		// with the message back in the queue, else it is asked again
		// after a retry's wait, in doubt still, until its retries run out.
		return r.attempted(log, m, transport.Result{}, err, start)
	case err != nil:
		return toRecord(r.doubtUnresolved(m, reason, err)), nil
	case answer.Had && answer.ProviderMessageID == "" && marks[0].Earlier:
		// A repeat with no id, after an earlier lookup whose answer was
		// lost: that lookup's own trace, or a send the receiver keeps no
		// id of. Nobody can say which.
		return toRecord(r.doubtUnresolved(m, reason, errors.New("the receiver had its key, with no message id, after an earlier lookup"))), nil
	case answer.Had:
		r.tally.processed.Add(1)
		r.tally.sent.Add(1)
		log.Info().Msg("in doubt after a crash and no longer wanted: the receiver had it, so it is recorded sent")
		return toRecord(outcome{status: sm.StatusSent, providerID: answer.ProviderMessageID}), nil
	}
	held, err := r.cancelHeld(m, reason)
	if err != nil {
		return turn{}, fmt.Errorf("cancel a message the receiver never had: %w", err)
	}
	if !held {
		log.Warn().Msg("claim lost before a message in doubt was cancelled; left to its new holder")
		return ended(endClaimLost, nil)
	}
	log.Info().Str("cancel_reason", reason).Msg("in doubt after a crash and no longer wanted: the receiver never had it; cancelled")
	return ended(endCancelled, nil)
}

// markLookup notes in the ledger that m is looked up (lookup_start.sql):
// a row while this processor holds m, none when its claim was lost.
func (r *run) markLookup(m claimed) ([]lookupStartRow, error) {
	var marks []lookupStartRow
	err := retryConflicts(func(ctx context.Context) error {
		return r.onServer(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
			var err error
			marks, err = lookupStartQuery.All(ctx, conn, lookupStartArgs{ID: m.ID, Holder: r.holder, Transport: r.cfg.Transport.Name()})
			return err
		})
	})
	return marks, err
}

// cancelHeld cancels m, which this processor holds and sent nothing of,
// with reason (cancel_doubted.sql), counts it and gives its budget slot
// back. It reports false, counting a lost claim, when m was no longer held.
func (r *run) cancelHeld(m claimed, reason string) (bool, error) {
	var cancelled []cancelDoubtedRow
	err := retryConflicts(func(ctx context.Context) error {
		return r.onServer(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
			var err error
			cancelled, err = cancelDoubtedQuery.All(ctx, conn, cancelDoubtedArgs{ID: m.ID, Reason: reason, Holder: r.holder})
			return err
		})
	})
	if err != nil || len(cancelled) == 0 {
		if err == nil {
			r.tally.claimsLost.Add(1)
		}
		return false, err
	}
	r.tally.cancel(reason)
	r.refund([]string{m.ID}, []claimed{m})
	return true, nil
}

// cancelUnsent cancels m before its request, which the transport would be
// refused (reason: us_marketing_blocked): nothing is sent.
func (r *run) cancelUnsent(ctx context.Context, m claimed, reason string) error {
	held, err := r.cancelHeld(m, reason)
	if err != nil {
		_, err = r.notStarted(ctx, m, fmt.Errorf("cancel a message before its request: %w", err))
		return err
	}
	log := r.messageLog(m)
	if !held {
		log.Warn().Msg("claim lost before a message was cancelled; left to its new holder")
		return nil
	}
	log.Info().Str("cancel_reason", reason).Str("meta_category", m.MetaCategory).
		Msg("Meta does not deliver this template to the recipient's country; cancelled before its request")
	return nil
}

// doubtUnresolved is the outcome of m, in doubt and no longer wanted, when
// nobody can say whether it went out (why): failed, outcome unknown, so
// that it is neither sent again nor said never to have been sent.
func (r *run) doubtUnresolved(m claimed, reason string, why error) outcome {
	r.tally.processed.Add(1)
	r.tally.failed.Add(1)
	log := r.messageLog(m)
	log.Warn().Str("unwanted", reason).Str("error", why.Error()).
		Msg("in doubt after a crash and no longer wanted, and the receiver cannot say whether it had it: failed, outcome unknown")
	return outcome{status: sm.StatusFailed, err: &doubtError{reason: reason, why: why}, notSent: true}
}

// doubtError is the error of a message doubtUnresolved failed: an
// ErrOutcomeUnknown (settle.sql keeps it in doubt).
type doubtError struct {
	reason string
	why    error
}

func (e *doubtError) Error() string {
	return "outcome unknown: no longer wanted (" + e.reason + ") after its process died mid-send, and whether its request " +
		"reached the receiver is unknown (" + e.why.Error() + "), so it is not sent again"
}

func (e *doubtError) Is(target error) bool { return target == ErrOutcomeUnknown }

func (e *doubtError) Unwrap() error { return e.why }
