package scheduler

import (
	"context"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// batcher moves users with one statement per batch and, when a statement
// fails, isolates the users that make it fail.
type batcher struct {
	move     func(ctx context.Context, ids []pgtype.UUID) (moved, queued int, err error)
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
// user commits. Errors that are about the connection, not the rows, stop the
// run instead: retrying them row by row would only fail n times.
func (b *batcher) moveIsolating(ctx context.Context, ids []pgtype.UUID) error {
	moved, queued, err := b.move(ctx, ids)
	switch {
	case err == nil:
		b.moved += moved
		b.queued += queued
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case postgres.IsConnectionError(err):
		return err
	case len(ids) == 1:
		b.failures = append(b.failures, failure{userID: ids[0], err: err})
		return nil
	}
	half := len(ids) / 2
	if err := b.moveIsolating(ctx, ids[:half]); err != nil {
		return err
	}
	return b.moveIsolating(ctx, ids[half:])
}
