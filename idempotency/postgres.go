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

// checkSQL inserts the key, or takes over an expired row of the same key
// (clearing its result); a live row is left alone and no row is returned.
// The conflict is resolved under the row's lock, so concurrent Checks of one
// key see exactly one winner.
const checkSQL = `
INSERT INTO engagement_idempotency_keys AS k (key, created_at, expires_at)
VALUES ($1, $2, $3)
ON CONFLICT (key) DO UPDATE
   SET created_at = EXCLUDED.created_at,
       expires_at = EXCLUDED.expires_at,
       result     = NULL
 WHERE k.expires_at <= $2
RETURNING true`

// Check records key and reports whether it was new or its earlier record
// had expired.
func (s *Postgres) Check(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	now := s.now()
	octx, cancel := s.opContext(ctx)
	defer cancel()
	var isNew bool
	err := s.pool.QueryRow(octx, checkSQL, s.prefix+key, now, now.Add(s.ttlOr(ttl))).Scan(&isNew)
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

// storeResultSQL sets the result of a live key, keeping its expiry, or
// records an unknown or expired key with the result and a fresh expiry.
const storeResultSQL = `
INSERT INTO engagement_idempotency_keys AS k (key, result, created_at, expires_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (key) DO UPDATE
   SET result     = EXCLUDED.result,
       created_at = CASE WHEN k.expires_at <= $3 THEN EXCLUDED.created_at ELSE k.created_at END,
       expires_at = CASE WHEN k.expires_at <= $3 THEN EXCLUDED.expires_at ELSE k.expires_at END`

// StoreResult keeps result for key until the key expires (or for ttl if the
// key is unknown or expired).
func (s *Postgres) StoreResult(ctx context.Context, key string, result []byte, ttl time.Duration) error {
	if result == nil {
		result = []byte{} // nil would be NULL: "no result"
	}
	now := s.now()
	octx, cancel := s.opContext(ctx)
	defer cancel()
	_, err := s.pool.Exec(octx, storeResultSQL, s.prefix+key, result, now, now.Add(s.ttlOr(ttl)))
	return s.fail(ctx, "store result", key, err)
}

// GetResult returns the result stored for a live key.
func (s *Postgres) GetResult(ctx context.Context, key string) ([]byte, bool, error) {
	octx, cancel := s.opContext(ctx)
	defer cancel()
	var (
		result []byte
		isNull bool
	)
	err := s.pool.QueryRow(octx,
		`SELECT result, result IS NULL FROM engagement_idempotency_keys WHERE key = $1 AND expires_at > $2`,
		s.prefix+key, s.now()).Scan(&result, &isNull)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.fail(ctx, "get result", key, err)
	}
	if isNull {
		return nil, false, nil
	}
	if result == nil {
		result = []byte{}
	}
	return result, true, nil
}

// Forget deletes key and its result, live or not.
func (s *Postgres) Forget(ctx context.Context, key string) error {
	octx, cancel := s.opContext(ctx)
	defer cancel()
	_, err := s.pool.Exec(octx, `DELETE FROM engagement_idempotency_keys WHERE key = $1`, s.prefix+key)
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
		tag, err := s.pool.Exec(ctx, `
DELETE FROM engagement_idempotency_keys
 WHERE key IN (SELECT key FROM engagement_idempotency_keys
                WHERE expires_at <= $1
                ORDER BY expires_at
                LIMIT $2
                  FOR UPDATE SKIP LOCKED)`, before, batch)
		if err != nil {
			return total, fmt.Errorf("idempotency store: postgres delete expired: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}
