package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// batchAttempts is how many times a batch is tried while its connection
// keeps being lost (pg_terminate_backend, a failover, a restart). A batch is
// one statement that re-checks every user and queues under idempotency keys,
// so running it again is safe: if the lost attempt did commit, the retry
// finds those users moved (or their keys taken) and changes nothing.
//
// Attempt n+1 starts n×lostRetryDelay after attempt n failed (1, 2, 3 s):
// about 6 s in all for a restarting server to come back. A longer outage
// ends the run with exit 1; the next run does what is left.
const (
	batchAttempts  = 4
	lostRetryDelay = time.Second
)

// batcher moves users with one statement per batch and, when a statement
// fails, isolates the users that make it fail.
// Its methods may run concurrently.
type batcher struct {
	move func(ctx context.Context, ids []pgtype.UUID) (moved, queued int, err error)
	// lost, when set, is called before a batch whose connection was lost is
	// tried again (attempt is the one that failed).
	lost     func(attempt int, err error)
	mu       sync.Mutex // guards the counters below
	moved    int
	queued   int
	failures []failure
}

type failure struct {
	userID pgtype.UUID
	err    error
}

// moveIsolating moves ids in one statement. When the database rejects it,
// the batch is split in halves and each is retried, down to single users, so
// one bad row fails alone (in about 2·log2(n) statements) and every other
// user commits. Errors that have nothing to do with the rows (the connection
// is gone, the statement is wrong) stop the run instead: retrying them row
// by row would only fail n times.
func (b *batcher) moveIsolating(ctx context.Context, ids []pgtype.UUID) error {
	moved, queued, err := b.moveRetrying(ctx, ids)
	switch {
	case err == nil:
		b.mu.Lock()
		b.moved += moved
		b.queued += queued
		b.mu.Unlock()
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case postgres.IsRowIndependent(err):
		return err
	case len(ids) == 1:
		b.mu.Lock()
		b.failures = append(b.failures, failure{userID: ids[0], err: err})
		b.mu.Unlock()
		return nil
	}
	half := len(ids) / 2
	if err := b.moveIsolating(ctx, ids[:half]); err != nil {
		return err
	}
	return b.moveIsolating(ctx, ids[half:])
}

// moveRetrying moves ids, trying again (up to batchAttempts in all, waiting
// longer each time) while the statement's connection is lost; any other
// outcome is returned as is.
func (b *batcher) moveRetrying(ctx context.Context, ids []pgtype.UUID) (moved, queued int, err error) {
	for attempt := 1; ; attempt++ {
		moved, queued, err = b.move(ctx, ids)
		if err == nil || ctx.Err() != nil || !postgres.IsConnectionLost(err) {
			return moved, queued, err
		}
		if attempt == batchAttempts {
			return 0, 0, fmt.Errorf("the database connection was lost %d times in a row: %w", attempt, err)
		}
		if b.lost != nil {
			b.lost(attempt, err)
		}
		wait := time.NewTimer(time.Duration(attempt) * lostRetryDelay)
		select {
		case <-ctx.Done():
			wait.Stop()
			return 0, 0, err
		case <-wait.C:
		}
	}
}
