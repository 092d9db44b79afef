package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// recordTimeout bounds a statement that records a delivery: it runs even
// while the run is being stopped, so that what was sent is written down.
const recordTimeout = 10 * time.Second

// The send ledger (engagement_processed_messages) has a row per message and
// transport: how many attempts reached the transport and how the last one
// ended. How a processor writes it is its recording strategy, chosen once
// from the transport:
//
//   - durable, for a transport that cannot de-duplicate: each attempt is
//     written as started, in the fenced statement that checks the claim
//     (start.sql), before the external call, and its outcome right after.
//     An attempt whose holder died is then known to be in doubt, and
//     recovery fails it rather than send it again.
//   - batched, for a transport that de-duplicates by idempotency key: no
//     start is written, and the outcomes are recorded together, those of
//     RecordDelay at a time, in one statement that does not wait for the
//     disk. A holder that dies leaves its batch to recovery, which puts
//     each message back in doubt (recover.sql): resent under its same key,
//     the receiver dropping the repeats, and never cancelled without
//     asking the receiver (doubt.go).
type recording interface {
	// begin reports whether the send of m may start now: whether this
	// processor still holds m's claim. On false, m's claim is lost. A
	// stop (ctx ending) while it writes the start cancels the statement
	// on the server: begin then fails and nothing was started, or the
	// start was written, and the send goes on as one in flight.
	begin(ctx context.Context, m claimed) (bool, error)
	// record takes an attempt's outcome.
	record(ctx context.Context, s settled) error
	// flush writes every outcome taken and not yet written.
	flush(ctx context.Context) error
}

// settled is a message's outcome, waiting to be recorded.
type settled struct {
	m claimed
	o outcome
}

// recording returns the processor's recording strategy for one batch.
func (r *run) recording() recording {
	if r.cfg.Transport.Deduplicates() {
		return &batchedRecording{run: r}
	}
	return durableRecording{run: r}
}

// durableRecording writes each attempt's start and outcome as it happens.
type durableRecording struct{ run *run }

func (r durableRecording) begin(ctx context.Context, m claimed) (bool, error) {
	if !r.run.lease.usable() {
		return false, nil
	}
	args := startArgs{ClaimTimeout: r.run.cfg.ClaimTimeout, ID: m.ID, Holder: r.run.holder, Transport: r.run.cfg.Transport.Name(),
		MetaCategory: strings.ToLower(m.MetaCategory), ClockOffset: r.run.cfg.ClockOffset}
	var started []startRow
	err := r.run.onServer(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		var err error
		started, err = startQuery.All(ctx, conn, args)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("start a send: %w", err)
	}
	return len(started) > 0, nil
}

func (r durableRecording) record(ctx context.Context, s settled) error {
	return r.run.settle([]settled{s}, false)
}

func (durableRecording) flush(context.Context) error { return nil }

// RecordDelay is the longest a batched outcome waits to be recorded: the
// provider id the receiver answered with is in the queue within it,
// whatever the pace or the receiver's latency, so that the bot's ack of the
// message finds it (issue 55: outcomes written when the whole claimed
// batch ended were recorded p50 9.7 s after the send at the default pace).
// Receipts that come sooner still are kept until it is (migration 65).
const RecordDelay = 200 * time.Millisecond

// batchedRecording keeps a batch's outcomes and records them together:
// those taken within RecordDelay of the first one waiting, in one
// statement, by a timer; the rest when the batch ends.
type batchedRecording struct {
	run   *run
	mu    sync.Mutex
	done  []settled
	timer *time.Timer
	err   error // the timer's recording failed: the next record or flush returns it
}

func (r *batchedRecording) begin(_ context.Context, m claimed) (bool, error) {
	return r.run.lease.usable(), nil
}

func (r *batchedRecording) record(_ context.Context, s settled) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.err; err != nil {
		r.err = nil
		return err
	}
	r.done = append(r.done, s)
	if r.timer == nil {
		r.timer = time.AfterFunc(RecordDelay, r.flushDue)
	}
	return nil
}

// flushDue records what waited RecordDelay.
func (r *batchedRecording) flushDue() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	r.err = errors.Join(r.err, r.write())
}

func (r *batchedRecording) flush(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	err := r.err
	r.err = nil
	return errors.Join(err, r.write())
}

// write records what waits; r.mu is held.
func (r *batchedRecording) write() error {
	done := r.done
	r.done = nil
	return r.run.settle(done, true)
}

// settle records outcomes on the messages and in the ledger, in one
// statement (settle.sql); attemptsUncounted says the strategy wrote no
// start, so each attempt that reached the transport is counted here. An
// outcome whose claim was lost meanwhile is not recorded, and is counted
// in ClaimsLost. With lazy, the commit does not wait for the disk (see
// batchedRecording: a record lost to a crash is a resend under the same
// key).
func (r *run) settle(done []settled, lazy bool) error {
	if len(done) == 0 {
		return nil
	}
	n := len(done)
	ids, statuses := make([]string, n), make([]string, n)
	providerIDs, errTexts := make([]string, n), make([]string, n) // '' for none (settle.sql)
	retryIns, attempted := make([]time.Duration, n), make([]int, n)
	inDoubt, spent := make([]bool, n), make([]bool, n)
	for i, d := range done {
		spent[i] = !d.o.unspent
		ids[i], statuses[i] = d.m.ID, d.o.status
		providerIDs[i], retryIns[i] = d.o.providerID, d.o.retryIn
		if d.o.err != nil {
			errTexts[i] = d.o.err.Error()
			inDoubt[i] = errors.Is(d.o.err, ErrOutcomeUnknown) || d.o.status == sm.StatusPending && maybeDelivered(d.o.err)
		}
		if lazy && !d.o.notSent {
			attempted[i] = 1
		}
	}
	args := settleArgs{
		IDs: ids, Statuses: statuses, ProviderIDs: providerIDs, RetryIns: retryIns,
		Errors: errTexts, Attempted: attempted, InDoubt: inDoubt, Spent: spent, Holder: r.holder, Transport: r.cfg.Transport.Name(),
		ClockOffset: r.cfg.ClockOffset,
	}
	var recorded int
	err := retryConflicts(func(ctx context.Context) error {
		ids, err := r.settleOnce(ctx, args, lazy)
		recorded = len(ids)
		return err
	})
	if err != nil {
		return fmt.Errorf("record the outcome of %d deliveries: %w", n, err)
	}
	if lost := n - recorded; lost > 0 {
		r.tally.claimsLost.Add(int64(lost))
		r.log.Warn().Int("messages", lost).Msg("claims lost before their outcomes were recorded; left to their new holder")
	}
	return nil
}

// maybeDelivered reports whether a failed attempt's request may have
// reached the receiver (written, and no answer came back).
func maybeDelivered(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.MaybeDelivered
}

// nullIfEmpty is s, or nil (NULL) when s is empty.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// lazyCommitSQL makes the rest of its transaction commit without waiting
// for the disk. It is set_config(…, true), not SET LOCAL: a pipelined batch
// is one implicit transaction, which is not a transaction block, so SET
// LOCAL there writes a WARNING into the server's log every time (432 in
// one test run, issue 24) although it applies all the same.
const lazyCommitSQL = `SELECT set_config('synchronous_commit', 'off', true)`

// settleOnce runs settle.sql once and returns the ids it recorded.
func (r *run) settleOnce(ctx context.Context, args settleArgs, lazy bool) ([]settleRow, error) {
	if !lazy {
		return settleQuery.All(ctx, r.pool, args)
	}
	// Pipelined as one implicit transaction: the setting holds for the
	// statement after it, and nothing outlives the transaction, so this
	// works through a transaction pooler too.
	var ids []settleRow
	b := &pgx.Batch{}
	b.Queue(lazyCommitSQL)
	settleQuery.QueueAll(b, args, &ids)
	err := r.pool.SendBatch(ctx, b).Close()
	return ids, err
}
