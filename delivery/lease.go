package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/sender"
	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// A claim belongs to a live processor. A message in flight is 'processing',
// claimed_by one processor (its holder name); the processor keeps a lease,
// one row in engagement_queue_holders that it renews every third of the
// claim timeout (hold.sql), and as long as that row is renewed in time,
// none of its claims can be taken, however long its sends or its batches
// take. Renewing one row instead of every claimed message keeps renewals
// off the rows that claims and outcomes lock, so they never wait on each
// other, let alone deadlock.
//
// A send starts only while the lease has a third of the timeout left as
// the processor knows it (lease.usable; the durable strategy also checks
// the claim in the statement that starts the send, start.sql), and an
// outcome is recorded only for a claim still held (settle.sql). A holder
// whose row was not renewed in time is dead: recovery buries it and
// settles its claims from the send ledger (recover.sql). A processor that
// stops hands back every claim it still has (the same statement, for its
// own claims) and deletes its row (unhold.sql).

// claimed is a message this processor holds.
type claimed struct {
	transport.Delivery
	rawParams  *string // message_params as JSON text; nil for SQL NULL
	retryCount int
	spend      *claimSpend // the budget's slots its claim spent, with ample room; nil otherwise
	waited     bool        // it waited on the send budget until this claim: it heads the line
	// unwanted is why a message in doubt (its request may have reached the
	// receiver before a crash) is no longer wanted: claim.sql claims it
	// instead of cancelling it, and the processor asks the receiver
	// (resolveDoubt). "" for every other message.
	unwanted string
	inDoubt  bool // its request may have reached the receiver before a crash (recover.sql)
	// inWindow: under --daily-limit auto, its user's customer service
	// window is open (claim.sql): it spends no slot of the budget.
	inWindow bool
}

// lease is this processor's lease as it knows it: the row's deadline
// counts from before the statement that set it was sent, so it is never
// later than the database's.
type lease struct {
	mu      sync.Mutex
	until   time.Time
	lost    bool // recovery buried this holder: its claims are gone
	timeout time.Duration
}

// renewed records a renewal sent at from.
func (l *lease) renewed(from time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lost {
		l.until = from.Add(l.timeout)
	}
}

// lose records that the lease is gone for good.
func (l *lease) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost = true
}

// usable reports whether a claim may be taken or a send started now: the
// lease holds with at least a third of its timeout left. A renewal comes
// every third of the timeout, so a live processor is always well inside
// it; one whose renewals fail stops starting sends long before recovery
// could bury it.
func (l *lease) usable() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost && time.Until(l.until) > l.timeout/3
}

// hold starts or renews the lease (hold.sql) through db. It reports false
// when recovery buried this holder.
func (r *run) hold(ctx context.Context, db postgres.Querier) (bool, error) {
	from := time.Now()
	held, err := holdQuery.All(ctx, db, holdArgs{Holder: r.holder, ClaimTimeout: r.cfg.ClaimTimeout})
	if err != nil {
		return false, fmt.Errorf("renew the claims' lease: %w", err)
	}
	if len(held) == 0 {
		r.lease.lose()
		return false, nil
	}
	r.lease.renewed(from)
	return true, nil
}

// keepAlive renews the lease every third of the claim timeout until ctx
// ends, on a connection of its own: a renewal never waits behind the
// workers' statements for one of the pool's. A failed renewal is logged
// and tried again at the next tick (on a new connection); meanwhile
// lease.usable stops new claims and sends as the lease runs out. A lease
// found buried ends the renewals and, through lost, the run.
func (r *run) keepAlive(ctx context.Context, lost func()) {
	tick := time.NewTicker(r.cfg.ClaimTimeout / 3)
	defer tick.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var err error
		if conn == nil {
			conn, err = pgx.ConnectConfig(ctx, r.pool.Config().ConnConfig.Copy())
		}
		ok := false
		if err == nil {
			ok, err = r.hold(ctx, conn)
		}
		if err != nil && conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			conn = nil
		}
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.log.Warn().Err(err).Msg("could not renew the claims' lease; retrying")
			}
		case !ok:
			r.log.Warn().Msg("the claims' lease ran out before it was renewed and recovery took its claims; stopping")
			lost()
			return
		}
	}
}

// cancelRepeat is how often a stop sends its cancel request again while
// a statement it cancels has not returned.
const cancelRepeat = 200 * time.Millisecond

// onServer runs a statement (stmt, on conn, under a context the stop does
// not cancel) that a stop cuts short on the server: when ctx ends before
// it returned, a cancel request is sent, never a dropped connection. A
// dropped connection can leave the statement running, waiting on a lock,
// to commit after the process has given up on it (a claim, claims behind
// the process's back; a start, a send the ledger calls started). After a
// cancel request, either the server says it cancelled the statement
// (nothing of it was written: the error is the server's, 57014) or its
// result arrives, and the caller acts on it. When ctx has ended before the
// statement is sent, it is not sent, and the error is ctx's.
func (r *run) onServer(ctx context.Context, stmt func(ctx context.Context, conn *pgxpool.Conn) error) error {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	pgConn := conn.Conn().PgConn()
	// A cancel request may reach the server before the statement does (a
	// stop just as the statement starts: it then cancels nothing, and the
	// statement could wait on a lock for good). So it is sent again every
	// cancelRepeat until the statement has returned.
	finished := make(chan struct{})
	cancelling := context.AfterFunc(ctx, func() {
		for {
			cctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
			_ = pgConn.CancelRequest(cctx)
			cancel()
			select {
			case <-finished:
				return
			case <-time.After(cancelRepeat):
			}
		}
	})
	defer func() {
		close(finished)
		if cancelling() {
			conn.Release()
			return
		}
		// A cancel request may reach the server after the statement ended,
		// and cancel whatever the connection runs next: it is not reused.
		_ = conn.Hijack().Close(context.Background())
	}()
	if err := ctx.Err(); err != nil {
		return err // stopping already: not sent
	}
	return stmt(context.WithoutCancel(ctx), conn)
}

// claim takes up to ClaimBatch due pending messages (claim.sql). In the
// same statement, messages no longer wanted are cancelled and messages due
// inside the quiet hours deferred; it counts both.
//
// A shutdown stops the statement on the server (onServer): either the
// server cancelled it (nothing was claimed) or its rows arrive, and the
// caller releases them.
func (r *run) claim(ctx context.Context) ([]claimed, int, error) {
	args := r.claimArgs()
	inOrder := false // under the budget's lock, whatever the room
	for {
		batch, moved, err := r.claimOnce(ctx, args, inOrder)
		switch {
		case r.budget != nil && noRoom(err):
			// Other claims took the room this one counted on: nothing was
			// claimed, and claims take the budget's lock from now on.
			r.budget.used.Store(int64(r.budget.limitNow()))
			continue
		case r.budget != nil && !inOrder && budgetBusy(err):
			// The budget's row stayed locked while the claim held its
			// messages (claimWaitSQL): nothing was claimed, and this
			// claim takes the budget's lock first, holding nothing.
			inOrder = true
			continue
		case err != nil:
			return nil, 0, fmt.Errorf("claim messages: %w", err)
		}
		return batch, moved, nil
	}
}

// claimArgs are the claim's arguments, as this run's configuration and
// what it knows of Meta's verdicts say.
func (r *run) claimArgs() claimArgs {
	args := claimArgs{
		Holder:          r.holder,
		ClaimTimeout:    r.cfg.ClaimTimeout,
		Batch:           int64(r.cfg.ClaimBatch),
		DefaultLocale:   sender.DefaultLocale,
		Timezone:        r.cfg.Timezone,
		Kinds:           sendRules,
		Transport:       r.budgetKey(),
		ClockOffset:     r.cfg.ClockOffset,
		KindPriority:    r.kindPriority(),
		PriorityMaxWait: r.cfg.KindPriorityMaxWait,
		CapWindow:       r.cfg.PerUserCapWindow,
		QualityHold:     r.verdict.qualityHold,
		PausedKeys:      r.verdict.pausedKeys(),
		VerdictRecheck:  VerdictRecheck,
		QuietStart:      nil, // each nil unless set, below
		QuietEnd:        nil,
		PerUserCap:      nil,
		SpendLimit:      nil,
		WindowMargin:    r.windowMargin(),
		ReachoutWindow:  r.reachoutWindow(),
	}
	if r.cfg.PerUserCap > 0 {
		args.PerUserCap = &r.cfg.PerUserCap
	}
	if q := r.cfg.QuietHours; q.Set() {
		args.QuietStart, args.QuietEnd = &q.Start, &q.End
	}
	return args
}

// claimOnce runs the claim. Under a send budget with ample room, the claim
// spends its slots itself (claim.sql's @spend_limit), side by side with
// other claims; near the limit, or inOrder, it takes the budget's lock
// first and the budget is applied to what it claimed in the same
// transaction (budget_apply.sql), so that the last slots go in due order.
func (r *run) claimOnce(ctx context.Context, args claimArgs, inOrder bool) ([]claimed, int, error) {
	inOrder = inOrder || r.budget != nil && r.budget.tight(r.cfg.Workers*r.cfg.ClaimBatch)
	args.SpendLimit = nil
	if r.budget != nil && !inOrder {
		limit := r.budget.limitNow()
		args.SpendLimit = &limit
	}
	var (
		batch []claimed
		moved int // cancelled or deferred by the claim
		held  int // held back by the budget
	)
	err := r.onServer(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		if !inOrder {
			var err error
			batch, moved, err = r.readClaim(ctx, conn, args)
			return err
		}
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if err := r.lockBudget(ctx, tx); err != nil {
				return err
			}
			var err error
			if batch, moved, err = r.readClaim(ctx, tx, args); err != nil {
				return err
			}
			claimedN := len(batch)
			batch, err = r.holdBack(ctx, tx, batch)
			held = claimedN - len(batch)
			return err
		})
	})
	if err != nil {
		return nil, 0, err
	}
	for range held {
		r.tally.deferral(sm.DeferredBudget)
	}
	return batch, moved + held, nil
}

// claimPlanSQL is sent with every claim, in its transaction: no bitmap
// scans while the claim is planned. The queue's statistics are usually
// older than its backlog (the daily job queues thousands of goodbyes at
// once, and autovacuum analyzes a table only after a tenth of it
// changed), and taking a due backlog for a few dozen rows, the planner
// read every due message through the pending index and sorted them to
// take the oldest @batch, in every claim: 19,600 rows read for 400
// claimed, a run over a backlog of n costing n² / @batch (issue 59). An
// index scan reads them in order and stops at @batch, whatever the
// statistics say. The claim's other steps read rows by key, with or
// without bitmaps. set_config(…, true), not SET LOCAL: see lazyCommitSQL.
const claimPlanSQL = `SELECT set_config('enable_bitmapscan', 'off', true)`

// claimWaitSQL is sent with a claim that spends its budget slots itself
// (ample room, claim.sql's @spend_limit): it locks its messages first and
// the budget's row last, where a hand-back, a recovery and the line's
// advance take the budget's lock first and their messages after. A FOR
// UPDATE keeps the lock of a row it passed over because the row changed
// under it (another worker's claim committed), so such a claim can hold a
// message one of those then waits on: waiting in turn on the budget, it
// deadlocked, and queue-process exited 1. Under this lock_timeout, well
// below PostgreSQL's deadlock_timeout (1 s by default), the claim gives up
// first (SQLSTATE 55P03, budgetBusy), having claimed nothing, and claims
// again under the budget's lock, holding no message while it waits.
const claimWaitSQL = `SELECT set_config('lock_timeout', '200ms', true)`

// budgetBusy reports a claim that gave up waiting on the budget's row
// (claimWaitSQL), or that PostgreSQL chose to break a deadlock with (a
// server whose deadlock_timeout is shorter than claimWaitSQL's wait).
func budgetBusy(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01")
}

// readClaim runs the claim (p.claimQuery) on db, after claimPlanSQL (and
// claimWaitSQL when it spends its slots) in the same transaction (one round
// trip, pipelined), and reads its rows: the
// messages claimed, and how many it cancelled or deferred (counted in the
// tally by reason).
func (r *run) readClaim(ctx context.Context, db batcher, args claimArgs) ([]claimed, int, error) {
	var rows []claimRow
	b := &pgx.Batch{}
	b.Queue(claimPlanSQL)
	if args.SpendLimit != nil {
		b.Queue(claimWaitSQL)
	}
	r.claimQuery.QueueAll(b, args, &rows)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return nil, 0, err
	}
	var (
		batch []claimed
		moved int
		spend *claimSpend
	)
	for i := range rows {
		row := &rows[i]
		switch {
		case row.Verdict == "claimed":
			m := claimed{
				Delivery: transport.Delivery{ID: row.ID, UserID: row.UserID, Type: row.MessageType, Key: row.MessageKey,
					Locale: row.Locale, Destination: row.Destination, DestinationJID: row.DestinationJID,
					IdempotencyKey: row.IdempotencyKey, Attempt: row.RetryCount + 1},
				rawParams:  row.MessageParams,
				retryCount: row.RetryCount,
				waited:     row.Waited,
				unwanted:   row.Unwanted,
				inDoubt:    row.InDoubt,
				inWindow:   row.WindowOpen,
			}
			if row.SpendID != nil {
				if spend == nil {
					spend = &claimSpend{id: *row.SpendID, left: map[string]int{}}
					r.budget.used.Store(int64(*row.BudgetUsed))
				}
				spend.left[m.DestinationJID]++
				m.spend = spend
			}
			batch = append(batch, m)
		case strings.HasPrefix(row.Verdict, "deferred:"):
			moved++
			r.tally.deferral(strings.TrimPrefix(row.Verdict, "deferred:"))
		default:
			moved++
			r.tally.cancel(strings.TrimPrefix(row.Verdict, "cancelled:"))
		}
	}
	return batch, moved, nil
}

// batcher is where a pipelined batch runs: a pool's connection, or a
// transaction.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// release hands claimed messages this processor has not sent back to the
// queue (release.sql), due as they were, their retries unspent.
func (r *run) release(ms []claimed) error { return r.handBackUnsent(ms, true) }

// releaseKeepingSlots is release for messages whose requests reached the
// receiver, which refused them unsent: their budget slots stay spent.
func (r *run) releaseKeepingSlots(ms []claimed) error { return r.handBackUnsent(ms, false) }

// handBackUnsent hands ms back (release.sql) and, with refund, gives back
// the budget slots of those it handed back that are not in doubt, in the
// same transaction (inBudgetTx).
func (r *run) handBackUnsent(ms []claimed, refund bool) error {
	if len(ms) == 0 {
		return nil
	}
	ids := claimIDs(ms)
	var released int
	var back []claimed
	err := retryConflicts(func(ctx context.Context) error {
		return r.inBudgetTx(ctx, refund, func(tx pgx.Tx) error {
			rows, err := releaseQuery.All(ctx, tx, releaseArgs{IDs: ids, Holder: r.holder})
			released = len(rows)
			if err != nil || !refund {
				return err
			}
			// Only the messages handed back give their slots back: a
			// claim lost meanwhile (the lease ran out while the process
			// was descheduled, and recovery settled it in doubt, its slot
			// kept) is sent again by its next holder without a slot of
			// its own (issue 59's chaos run: 202 users under a daily limit
			// of 200). A message in doubt keeps the slot of the claim that
			// may have sent it (recover.sql): handed back unsent now, it
			// still may have gone then.
			mine := make(map[string]bool, len(rows))
			for _, row := range rows {
				mine[row.ID] = true
			}
			back = back[:0]
			for _, m := range ms {
				if mine[m.ID] && !m.inDoubt {
					back = append(back, m)
				}
			}
			return r.refundIn(ctx, tx, claimIDs(back), back)
		})
	})
	if err != nil {
		return fmt.Errorf("release claimed messages: %w", err)
	}
	r.tally.released.Add(int64(released))
	handedBack(back)
	return nil
}

// inBudgetTx runs f in one transaction that first takes the send budget's
// lock (budget_lock.sql) when withBudget is set and the run has a budget.
// Messages handed back and the slots they give back then commit together:
// a message is back in the queue only once its slot is. Handed back first
// and refunded in a transaction of its own, a message could be claimed
// again in between, and the refund then took the new claim's slot
// (budget_refund.sql finds its slots by message): 252 users reached under
// a portfolio limit of 250 (issue 60's suite run, two numbers of one
// portfolio near the limit). The lock comes first, as in every claim near
// the limit (claimOnce), so the two cannot deadlock.
func (r *run) inBudgetTx(ctx context.Context, withBudget bool, f func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if withBudget && r.budget != nil {
			if _, err := budgetLockQuery.Exec(ctx, tx, budgetLockArgs{Transport: r.budgetKey()}); err != nil {
				return err
			}
		}
		return f(tx)
	})
}

// claimIDs are ms's ids.
func claimIDs(ms []claimed) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// recoverAbandoned settles the messages whose claim was abandoned
// (recover.sql) and returns how many. Workers that call it at once share
// one statement and its count.
func (r *run) recoverAbandoned(ctx context.Context) (int, error) {
	v, err, _ := r.recovering.Do("recover", func() (any, error) {
		n, err := r.recoverClaims(ctx, "")
		if err != nil {
			return 0, fmt.Errorf("settle abandoned claims: %w", err)
		}
		if n > 0 {
			r.tally.recovered.Add(int64(n))
			r.log.Warn().Int("messages", n).Msg("settled messages whose claim was abandoned")
		}
		return n, nil
	})
	return v.(int), err
}

// recoverClaims runs recover.sql, for own's claims too when own is set,
// and gives back the budget slots of the messages it made pending again,
// in the same transaction (inBudgetTx). It returns how many it settled.
func (r *run) recoverClaims(ctx context.Context, own string) (int, error) {
	var settled int
	err := r.inBudgetTx(ctx, true, func(tx pgx.Tx) error {
		row, err := recoverQuery.One(ctx, tx, recoverArgs{
			Own:          own,
			Transport:    r.cfg.Transport.Name(),
			Deduplicates: r.cfg.Transport.Deduplicates(),
			Unknown:      ErrOutcomeUnknown.Error(),
		})
		if err != nil {
			return err
		}
		settled = row.Settled
		return r.refundIn(ctx, tx, row.Pending, nil)
	})
	return settled, err
}

// handBack runs as a processor stops, after its last send: every claim it
// still has is settled from the send ledger (recover.sql for its own
// claims: sent when the ledger says so, pending again otherwise, failed as
// "outcome unknown" for a send in doubt on a transport that cannot
// de-duplicate), and its lease row is deleted. It keeps trying while the
// database does not answer (a restart) for as long as the lease would have
// protected the claims anyway, and returns how many claims it could not
// hand back: recovery settles those once the lease runs out.
func (r *run) handBack() (left int, err error) {
	deadline := time.Now().Add(r.cfg.ClaimTimeout)
	wait := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		var n int
		n, err = r.recoverClaims(ctx, r.holder)
		if err == nil {
			_, err = unholdQuery.Exec(ctx, r.pool, unholdArgs{Holder: r.holder})
		}
		cancel()
		if err == nil {
			if n > 0 {
				r.tally.released.Add(int64(n))
			}
			return 0, nil
		}
		if time.Now().Add(wait).After(deadline) {
			break
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Second)
	}
	left, countErr := r.ownClaims()
	if countErr != nil {
		left = -1 // unknown: the database does not answer
	}
	return left, fmt.Errorf("hand back the claims: %w", err)
}

// ownClaims counts the messages this processor still holds.
func (r *run) ownClaims() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	row, err := ownClaimsQuery.One(ctx, r.pool, ownClaimsArgs{Holder: r.holder})
	return row.Claims, err
}

// retryConflicts runs a statement on claimed rows under recordTimeout,
// whatever the run's state, and runs it again when PostgreSQL broke a
// deadlock or a serialization conflict by failing it (statements on claimed
// rows lock them in one order, so neither should happen; if one still
// does, the statement was rolled back whole), or when the connection was
// lost under it (a server restart: what was sent is recorded once the
// server is back, rather than resent). Each statement it runs is fenced on
// the holder, so running it again after a lost acknowledgement changes
// nothing twice.
func retryConflicts(stmt func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	for try := 1; ; try++ {
		err := stmt(ctx)
		switch {
		case err == nil:
			return nil
		case isConflict(err) && try < 5, postgres.IsConnectionLost(err):
		default:
			return err
		}
		if !sleep(ctx, min(time.Duration(try)*20*time.Millisecond, 500*time.Millisecond)) {
			return err
		}
	}
}

// isConflict reports a deadlock or serialization failure.
func isConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}
