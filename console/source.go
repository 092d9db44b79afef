package console

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// source is where a page reads its data, and how long each statement may
// take: given to its loader, as a value, by the page's declaration
// (page.go). A page read at each request and the actions read the
// primary with StatementTimeout (server.live); a snapshot reads the
// replica when there is one, with SnapshotTimeout
// (server.snapshotSource).
type source struct {
	pool *pgxpool.Pool
	// replica is set when pool is the read replica.
	replica bool
	// timeout bounds each statement.
	timeout time.Duration
	// asOf is the instant the pages treat as now (Config.AsOf); the
	// database's clock when nil.
	asOf func() time.Time
}

// live is the source of a page read at each request: the primary,
// StatementTimeout.
func (s *server) live() source {
	return source{pool: s.cfg.Pool, timeout: s.cfg.StatementTimeout, asOf: s.cfg.AsOf}
}

// snapshotSource is the source of a snapshot's computation, which reads
// whole tables in the background: SnapshotTimeout (StatementTimeout if
// longer), and the replica when there is one, unless primary (a page
// that dry-runs the daily job).
func (s *server) snapshotSource(primary bool) source {
	src := source{pool: s.cfg.Pool, timeout: max(s.cfg.StatementTimeout, s.cfg.SnapshotTimeout), asOf: s.cfg.AsOf}
	if s.cfg.Replica != nil && !primary {
		src.pool, src.replica = s.cfg.Replica, true
	}
	return src
}

// read runs fn in a read-only REPEATABLE READ transaction whose statements
// each stop after the source's timeout, and gives it the page's as-of.
func (src source) read(ctx context.Context, fn func(tx pgx.Tx, asOf time.Time) error) error {
	return src.in(ctx, pgx.ReadOnly, fn)
}

// dryRun is read for a page that dry-runs the daily job (the forecast):
// the job's move statements with their writes switched off
// (scheduler.ForecastDaily) write and lock nothing, but PostgreSQL refuses
// a statement that could write in a READ ONLY transaction or on a
// standby, so fn runs in a transaction that is not read-only and is
// always rolled back, on a source of the primary.
func (src source) dryRun(ctx context.Context, fn func(tx pgx.Tx, asOf time.Time) error) error {
	return src.in(ctx, pgx.ReadWrite, fn)
}

// in is read in a transaction of the access mode given.
func (src source) in(ctx context.Context, access pgx.TxAccessMode, fn func(tx pgx.Tx, asOf time.Time) error) error {
	tx, err := src.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: access})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // nothing to keep: always rolled back
	if err := limit(ctx, tx, src.timeout); err != nil {
		return err
	}
	asOf, err := src.now(ctx, tx)
	if err != nil {
		return err
	}
	return fn(tx, asOf)
}

// replicaStatus reads how far behind the replica is, when the source is
// one (nil, the primary's, otherwise): a snapshot says it beside its data.
func (src source) replicaStatus(ctx context.Context) (*replicaStatus, error) {
	if !src.replica {
		return nil, nil
	}
	var st *replicaStatus
	err := src.read(ctx, func(tx pgx.Tx, _ time.Time) error {
		var err error
		st, err = readReplicaStatus(ctx, tx)
		return err
	})
	return st, err
}

func (src source) now(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	if src.asOf != nil {
		return src.asOf().UTC(), nil
	}
	return postgres.Now(ctx, tx)
}

// limit sets the statement timeout for the rest of tx (SET LOCAL: it
// ends with the transaction, so it holds through a transaction pooler).
// JIT compilation is off: the pages' statements read a lot but are
// planned over estimates that make compiling them cost more than it
// saves.
func limit(ctx context.Context, tx pgx.Tx, timeout time.Duration) error {
	_, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true), set_config('jit', 'off', true)",
		fmt.Sprintf("%dms", timeout.Milliseconds()))
	return err
}
