package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The statement timeout is applied by the client, per statement, instead of
// as PostgreSQL's statement_timeout setting: a transaction pooler (PgBouncer,
// Supavisor) rejects it as a startup parameter, and a plain SET would leak
// into whichever client the pooler hands the server connection to next.
//
// Every statement (Exec, Query including the reading of its rows, QueryRow,
// SendBatch) runs under a context deadline of the timeout. When it passes,
// (and a grace: see clientGrace), the statement's connection is closed (pgx's
// default) and the caller gets a "timeout: context deadline exceeded" error. No cancel request is sent:
// PgBouncer before 1.20 can crash when a Go client abandons a cancel request
// (pgbouncer/pgbouncer#801, #904), and the job's statements that may run
// long (its batches) carry a server-side limit of their own (SET LOCAL in
// their transaction, scheduler's lease), so the server stops them itself.
// Nothing is left on the session, so this works the same directly and
// through any pooler.

// clientGrace is how long after the statement timeout the client gives up on
// a statement: a server-side limit of the same value (SET LOCAL) fires first
// and ends the statement cleanly. The grace is the limit itself, between a
// second (a round trip to a far server and back) and five: a short limit is
// not kept waiting five seconds past itself.
func clientGrace(limit time.Duration) time.Duration {
	return min(max(limit, time.Second), 5*time.Second)
}

// StatementTimeout returns the statement timeout of the statements run under
// ctx on a pool made by Open: the pool's (DefaultStatementTimeout or the
// URL's statement_timeout) unless WithStatementTimeout chose another. Code
// that sets a server-side limit in its transaction (SET LOCAL
// statement_timeout) takes it from here.
func StatementTimeout(ctx context.Context, pool *pgxpool.Pool) time.Duration {
	if d, ok := ctx.Value(limitKey{}).(time.Duration); ok {
		return d
	}
	if l, ok := pool.Config().ConnConfig.Tracer.(*statementLimiter); ok {
		return l.timeout
	}
	return 0
}

// timeoutError is the cause of a context that ran out of statement time.
type timeoutError struct{ limit time.Duration }

func (e *timeoutError) Error() string {
	return fmt.Sprintf("statement timeout (the client's limit of %s)", e.limit)
}

type limitKey struct{}

// WithStatementTimeout returns ctx with the statement timeout of the
// statements run under it set to d instead of the pool's (0: no limit but
// ctx's own). A statement that is meant to run long (a wait for another
// run, a bulk load) says so this way.
func WithStatementTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, limitKey{}, d)
}

// statementLimiter is the pgx tracer that puts every statement under its
// deadline.
type statementLimiter struct {
	timeout time.Duration
}

type endKey struct{}

func (l *statementLimiter) start(ctx context.Context) context.Context {
	limit := l.timeout
	if d, ok := ctx.Value(limitKey{}).(time.Duration); ok {
		limit = d
	}
	if limit <= 0 {
		return ctx
	}
	ctx, cancel := context.WithTimeoutCause(ctx, limit+clientGrace(limit), &timeoutError{limit: limit})
	return context.WithValue(ctx, endKey{}, cancel)
}

func (l *statementLimiter) end(ctx context.Context) {
	cancel, ok := ctx.Value(endKey{}).(context.CancelFunc)
	if !ok {
		return
	}
	cancel()
}

// TraceQueryStart implements pgx.QueryTracer.
func (l *statementLimiter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return l.start(ctx)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (l *statementLimiter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	l.end(ctx)
}

// TraceBatchStart implements pgx.BatchTracer.
func (l *statementLimiter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return l.start(ctx)
}

// TraceBatchQuery implements pgx.BatchTracer.
func (l *statementLimiter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (l *statementLimiter) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	l.end(ctx)
}

// parseTimeout reads a PostgreSQL time setting as statement_timeout takes
// it: a number of milliseconds, or a number with a unit (ms, s, min, h, d).
func parseTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"min", time.Minute}, {"s", time.Second}, {"h", time.Hour}, {"d", 24 * time.Hour}, {"", time.Millisecond}}
	for _, u := range units {
		num, ok := strings.CutSuffix(v, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || n < 0 {
			break
		}
		return time.Duration(n * float64(u.unit)), nil
	}
	return 0, fmt.Errorf("statement_timeout %q is not a duration (milliseconds, or a number with ms, s, min, h or d)", v)
}
