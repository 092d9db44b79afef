package delivery

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// A wish is an opt-out or an erasure (issue 56). Erase and an opt-out stop
// every message of their user whose request has not started, claimed or
// not. Paced, each message is checked alone right before its request
// (sendcheck.go), so nothing more is needed. Unpaced, a batch's check
// counts for RecheckAge (a second), which let an opt-out that committed
// after it miss the user's next requests by up to 917 ms. Checking the
// rest of every batch more often costs the rate the batching buys (a check
// every 250 ms cost 1.6 to 1.9 times the time, docs/BENCHMARKS.md), so a
// wish leaves a mark instead (engagement_wishes, migration 72: the opt-out's
// consent event writes it, and erase), and a run reads the marks, every
// WishRefresh while it sends, in one small statement for all its workers
// (queries/wishes.sql; the transport's pause is read in the same round
// trip, pause.go). A message about to be sent whose user has a wish
// read since the batch's last check is checked again first
// (recheck.sql), and a worker does not start a request while the run's
// newest read is older than WishAge: it waits for a fresher one.
//
// The bound: a request starts at most WishBound after the commit of a wish
// it does not obey. The read that allows it was sent at most WishAge before
// the decision to send (every wish that committed before that statement is
// in what it returned), and WishBound leaves 100 ms from that decision to
// the request leaving the process: the start's statement (a transport
// that cannot de-duplicate) and the transport's write, a few milliseconds
// each. Two things stretch it: a process the machine stalls longer than
// that between the two, and a database that takes longer than WishAge to
// answer the read (the workers then wait for each read, and send on it:
// the bound becomes the read's time and the 100 ms; the rate falls, as
// docs/BENCHMARKS.md measured on a machine at load 40). A 131050 from Meta is a wish of this
// process: the user's other claimed messages learn it at once
// (optOutOn131050), not at the next read.
const (
	WishBound   = 250 * time.Millisecond
	WishAge     = 150 * time.Millisecond
	WishRefresh = 50 * time.Millisecond
)

// wishes is a run's view of the wishes: the users whose wish it read, and
// since when.
type wishes struct {
	run *run

	mu sync.Mutex
	// readAt is when the newest read's statement was sent: every wish that
	// committed before it is in users. Zero before the run's start.
	readAt time.Time
	since  int64              // the newest read's snapshot xmin: the next read's @since
	seen   map[int64]struct{} // the wish ids the newest read returned
	// users: each user with a wish read in the last few seconds, and when
	// the read that found it returned (the wish had committed by then).
	users map[string]time.Time

	reading sync.Mutex     // one read at a time
	pending sync.WaitGroup // reads started in the background
}

// startWishes starts the run's view of the wishes, before its first claim:
// a wish that committed before it is seen by the claims, which come after.
// It also deletes the marks older than a day.
func (r *run) startWishes(ctx context.Context) error {
	r.wishes = nil
	if r.pacer != nil || r.recheckAge < 0 || r.wishAge < 0 {
		return nil // paced, each message is checked right before its send
	}
	at := r.clock()
	var row wishesStartRow
	err := r.readWithPause(ctx, func(b *pgx.Batch) { wishesStartQuery.QueueOne(b, sqlfile.None{}, &row) })
	if err != nil {
		return fmt.Errorf("start reading the opt-outs and erasures: %w", err)
	}
	r.wishes = &wishes{run: r, readAt: at, since: row.Xmin, seen: map[int64]struct{}{}, users: map[string]time.Time{}}
	return nil
}

// readWithPause runs the statements queue queues and, on a transport that
// can be paused, the read of its pause (pause_active.sql), in one round
// trip; a pause found stops the run (pauseRun).
func (r *run) readWithPause(ctx context.Context, queue func(b *pgx.Batch)) error {
	var pauses []pauseActiveRow
	err := r.onServer(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		b := &pgx.Batch{}
		queue(b)
		if r.pausable() {
			pauseActiveQuery.QueueAll(b, pauseActiveArgs{Transport: r.cfg.Transport.Name(), ClockOffset: r.cfg.ClockOffset}, &pauses)
		}
		return conn.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return err
	}
	if pause := activePause(r.cfg.Transport.Name(), pauses); pause != nil {
		r.pauseRun(pause)
	}
	return nil
}

// wait waits for the reads started in the background.
func (w *wishes) wait() {
	if w != nil {
		w.pending.Wait()
	}
}

// note records a wish this process learned of itself (a 131050), at once.
func (w *wishes) note(userID string) {
	if w == nil || userID == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.users[userID] = w.run.clock()
}

// wishedSince reports whether userID has a wish that may have committed after
// checkedAt (the statement time of the check that last covered the
// message), reading the wishes again first when the newest read is older
// than WishAge, and starting a read in the background when it is older than
// WishRefresh. An error is the read's.
func (w *wishes) wishedSince(ctx context.Context, userID string, checkedAt time.Time) (bool, error) {
	if err := w.fresh(ctx); err != nil {
		return false, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.users[userID]
	return ok && at.After(checkedAt), nil
}

// fresh reads the wishes (and the transport's pause) again first when the
// newest read is older than WishAge, and starts a read in the background
// when it is older than WishRefresh. An error is the read's.
func (w *wishes) fresh(ctx context.Context) error {
	w.mu.Lock()
	age := w.run.clock().Sub(w.readAt)
	w.mu.Unlock()
	if age > w.run.wishAge {
		return w.read(ctx)
	}
	if age > WishRefresh && w.reading.TryLock() {
		w.pending.Go(func() {
			defer w.reading.Unlock()
			// A failed read in the background is retried by the next
			// send, which waits for it once the view is too old.
			_ = w.readLocked(context.WithoutCancel(ctx))
		})
	}
	return nil
}

// read reads the wishes again, unless a read that finished meanwhile
// (another worker's) is young enough, or was sent after the call: then it
// is as fresh as any read this call could make, and the workers waiting
// on a slow database share it rather than read one after another.
func (w *wishes) read(ctx context.Context) error {
	called := w.run.clock()
	w.reading.Lock()
	defer w.reading.Unlock()
	w.mu.Lock()
	fresh := w.run.clock().Sub(w.readAt) <= w.run.wishAge || !w.readAt.Before(called)
	w.mu.Unlock()
	if fresh {
		return nil
	}
	return w.readLocked(ctx)
}

// readLocked runs wishes.sql; w.reading is held.
func (w *wishes) readLocked(ctx context.Context) error {
	w.mu.Lock()
	since := w.since
	w.mu.Unlock()
	at := w.run.clock()
	var row wishesRow
	err := w.run.readWithPause(ctx, func(b *pgx.Batch) { wishesQuery.QueueOne(b, wishesArgs{Since: since}, &row) })
	if err != nil {
		return fmt.Errorf("read the opt-outs and erasures: %w", err)
	}
	returned := w.run.clock()
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := make(map[int64]struct{}, len(row.IDs))
	for i, id := range row.IDs {
		seen[id] = struct{}{}
		if _, ok := w.seen[id]; !ok {
			w.users[row.Users[i]] = returned
		}
	}
	// A check covers a message for RecheckAge at most: a wish read longer
	// ago than that came before every check still in use.
	for u, t := range w.users {
		if returned.Sub(t) > 2*max(w.run.recheckAge, time.Second) {
			delete(w.users, u)
		}
	}
	w.seen, w.since, w.readAt = seen, row.Xmin, at
	return nil
}
