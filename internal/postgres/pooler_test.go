package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// TestOpenThroughPgBouncer (issue 15): Open works through a stock PgBouncer
// in transaction mode with the URL unchanged. On the old code it failed with
// "unsupported startup parameter: statement_timeout"; with that ignored, a
// statement run often enough failed with `prepared statement "stmtcache_…"
// already exists (42P05)`, and a []byte argument written to a json column
// failed with 22P02. Many statements from several connections go through the
// same few server connections here.
func TestOpenThroughPgBouncer(t *testing.T) {
	t.Parallel()
	_, pooled := pgtest.NewPooledDatabase(t)
	ctx := t.Context()
	pool, err := postgres.Open(ctx, pooled, "engagement-test")
	if err != nil {
		t.Fatalf("Open through PgBouncer: %v", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE pooled (id int PRIMARY KEY, doc jsonb NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(map[string]int{"n": 1})
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			for i := range 50 {
				id := w*100 + i
				if _, err := pool.Exec(ctx, `INSERT INTO pooled (id, doc) VALUES ($1, $2)`, id, string(doc)); err != nil {
					errs <- err
					return
				}
				var n int
				if err := pool.QueryRow(ctx, `SELECT (doc->>'n')::int FROM pooled WHERE id = $1`, id).Scan(&n); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("statements through PgBouncer: %v", err)
		}
	}
}

// TestStatementTimeout: a statement that outlives the URL's
// statement_timeout (and the client's grace) fails, directly and through
// PgBouncer, and the pool goes on working; WithStatementTimeout lifts the
// limit for one statement. The old code sent statement_timeout as a startup
// parameter, which PgBouncer refuses.
func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	direct, pooled := pgtest.NewPooledDatabase(t)
	for _, tt := range []struct{ name, url string }{{"direct", direct}, {"through PgBouncer", pooled}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool, err := postgres.Open(ctx, withQuery(t, tt.url, "statement_timeout", "100ms"), "engagement-timeout")
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer pool.Close()
			if got := postgres.StatementTimeout(ctx, pool); got != 100*time.Millisecond {
				t.Errorf("StatementTimeout = %s, want the URL's 100ms", got)
			}
			if got := postgres.StatementTimeout(postgres.WithStatementTimeout(ctx, 0), pool); got != 0 {
				t.Errorf("StatementTimeout under WithStatementTimeout(0) = %s, want 0", got)
			}
			start := time.Now()
			err = fixture.PgSleep(ctx, pool, 60)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a statement past the timeout: %v; want a timeout", err)
			}
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("the statement ran %s past a 100ms timeout", took)
			}
			// The pool works afterwards, and a statement may be given more
			// time: longer than the 100ms limit and its grace (a second).
			if err := fixture.PgSleep(postgres.WithStatementTimeout(ctx, time.Minute), pool, 1.5); err != nil {
				t.Errorf("a statement with its own longer limit: %v", err)
			}
		})
	}
}

// TestParseConfigForPoolers: no startup parameter but application_name, exec
// mode unless the URL chooses, and an unreadable statement_timeout is an
// error.
func TestParseConfigForPoolers(t *testing.T) {
	t.Parallel()
	cfg, err := postgres.ParseConfig("postgres://jobs@db/engagement?statement_timeout=5min", "engagement-daily")
	if err != nil {
		t.Fatal(err)
	}
	for name := range cfg.ConnConfig.RuntimeParams {
		if name != "application_name" {
			t.Errorf("startup parameter %q is sent; a transaction pooler may reject it", name)
		}
	}
	if got := cfg.ConnConfig.DefaultQueryExecMode; got != pgx.QueryExecModeExec {
		t.Errorf("query exec mode %v, want exec (no named prepared statements)", got)
	}
	cfg, err = postgres.ParseConfig("postgres://jobs@db/engagement?default_query_exec_mode=simple_protocol", "engagement-daily")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ConnConfig.DefaultQueryExecMode; got != pgx.QueryExecModeSimpleProtocol {
		t.Errorf("the URL's default_query_exec_mode=simple_protocol gave %v", got)
	}
	if _, err := postgres.ParseConfig("postgres://jobs:hunter2@db/engagement?statement_timeout=soon", "engagement-daily"); err == nil ||
		!strings.Contains(err.Error(), "statement_timeout") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("statement_timeout=soon: %v; want an error naming it, without the password", err)
	}
}

// TestRequireSession: directly, a database URL gives a session; through
// PgBouncer in transaction mode it does not (ErrTransactionPooler), and the
// probe leaves no setting behind on the pooled server connections.
func TestRequireSession(t *testing.T) {
	t.Parallel()
	direct, pooled := pgtest.NewPooledDatabase(t)
	ctx := t.Context()
	if err := postgres.RequireSession(ctx, direct); err != nil {
		t.Errorf("direct: RequireSession = %v, want nil", err)
	}
	for range 3 {
		if err := postgres.RequireSession(ctx, pooled); !errors.Is(err, postgres.ErrTransactionPooler) {
			t.Fatalf("through PgBouncer in transaction mode: RequireSession = %v, want ErrTransactionPooler", err)
		}
	}
	conn, err := pgx.Connect(ctx, pooled)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for range 5 {
		if v := fixture.PgSessionSetting(t, conn, "engagement.session_probe"); v != "" {
			t.Errorf("the probe left engagement.session_probe = %q on a pooled server connection", v)
		}
	}
}
