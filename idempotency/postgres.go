package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is a Store on the table engagement_idempotency_keys (migration
// 000004). Expiry is computed from Options.Now, passed to every statement;
// the database clock is never used.
type Postgres struct {
	base
	pool *pgxpool.Pool
}

var (
	_ Store     = (*Postgres)(nil)
	_ Forgetter = (*Postgres)(nil)
)

// NewPostgres returns a Store on the table engagement_idempotency_keys.
func NewPostgres(pool *pgxpool.Pool, opts Options) *Postgres {
	return &Postgres{base: newBase("postgres", opts), pool: pool}
}

// Check records key and reports whether it was new or its earlier record
// had expired.
func (s *Postgres) Check(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	now := s.now()
	octx, cancel := s.opContext(ctx)
	defer cancel()
	_, err := checkQuery.One(octx, s.pool, checkArgs{Key: s.prefix + key, Now: now, ExpiresAt: now.Add(s.ttlOr(ttl))})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // a live duplicate
	}
	if err != nil {
		if err := s.fail(ctx, "check", key, err); err != nil {
			return false, err
		}
		// FailOpen: the key counts as new.
	}
	return true, nil
}

// StoreResult keeps result for key until the key expires (or for ttl if the
// key is unknown or expired).
func (s *Postgres) StoreResult(ctx context.Context, key string, result []byte, ttl time.Duration) error {
	if result == nil {
		result = []byte{} // nil would be NULL: "no result"
	}
	now := s.now()
	octx, cancel := s.opContext(ctx)
	defer cancel()
	_, err := storeResultQuery.Exec(octx, s.pool, storeResultArgs{
		Key: s.prefix + key, Result: result, Now: now, ExpiresAt: now.Add(s.ttlOr(ttl)),
	})
	return s.fail(ctx, "store result", key, err)
}

// GetResult returns the result stored for a live key.
func (s *Postgres) GetResult(ctx context.Context, key string) ([]byte, bool, error) {
	octx, cancel := s.opContext(ctx)
	defer cancel()
	row, err := getResultQuery.One(octx, s.pool, getResultArgs{Key: s.prefix + key, Now: s.now()})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.fail(ctx, "get result", key, err)
	}
	if row.NoResult {
		return nil, false, nil
	}
	result := row.Result
	if result == nil {
		result = []byte{}
	}
	return result, true, nil
}

// Forget deletes key and its result, live or not.
func (s *Postgres) Forget(ctx context.Context, key string) error {
	octx, cancel := s.opContext(ctx)
	defer cancel()
	_, err := forgetQuery.Exec(octx, s.pool, forgetArgs{Key: s.prefix + key})
	return s.fail(ctx, "forget", key, err)
}

// DefaultDeleteBatch is DeleteExpired's batch size when it is given 0.
const DefaultDeleteBatch = 1000

// DeleteExpired deletes the keys (of every prefix) that expired at or before
// before, batch rows per statement (DefaultDeleteBatch when batch <= 0), and
// returns how many it deleted. Each batch commits on its own, so a large
// backlog never holds many locks, and rows a concurrent Check is reviving
// are skipped. Expired keys are already reusable; deleting them only keeps
// the table small. Errors are returned whatever the fail mode.
func (s *Postgres) DeleteExpired(ctx context.Context, before time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = DefaultDeleteBatch
	}
	var total int64
	for {
		tag, err := deleteExpiredQuery.Exec(ctx, s.pool, deleteExpiredArgs{Before: before, Batch: int64(batch)})
		if err != nil {
			return total, fmt.Errorf("idempotency store: postgres delete expired: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}
