package pgtest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/jackc/pgx/v5"
)

// TestBouncerIsTransactionPooled: a database reached through NewBouncer is
// the same database, and it is pooled per transaction: two transactions of
// one client connection may run on different server backends, and a
// session-level setting does not follow the client to the next one. Also,
// a stock PgBouncer rejects a statement_timeout startup parameter, as the
// production pooler of issue 15 did; and installing the package left no
// system pgbouncer service running.
func TestBouncerIsTransactionPooled(t *testing.T) {
	t.Parallel()
	direct, pooled := NewPooledDatabase(t)
	if direct == pooled {
		t.Fatalf("the pooled URL %s is the direct one", pooled)
	}
	ctx := t.Context()

	// Hold a backend busy in an open transaction on a second client, so
	// that the first client's transactions need whatever backend is free.
	a := connectT(t, pooled)
	if got, want := currentDatabase(t, a), currentDatabase(t, connectT(t, direct)); got != want {
		t.Fatalf("through the bouncer: database %q, want %q", got, want)
	}
	if pool, err := value[string](ctx, a, `SHOW pool_mode`); err == nil {
		t.Errorf("SHOW pool_mode answered %q on a PostgreSQL backend; want the bouncer to pass it through", pool)
	}

	// Session state set outside a transaction does not stick: the next
	// statement's backend is chosen afresh. Two clients interleave so that
	// the backends must swap.
	b := connectT(t, pooled)
	pids := map[int]bool{}
	for range 5 {
		txA, err := a.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pidA := deref(t, oneT(t, txA, kitBackendPIDQuery, sqlfile.None{}).PID)
		pids[pidA] = true
		pidB := deref(t, oneT(t, b, kitBackendPIDQuery.WithMode(pgx.QueryExecModeSimpleProtocol), sqlfile.None{}).PID)
		pids[pidB] = true
		if pidA == pidB {
			t.Fatalf("two clients' concurrent transactions share backend %d", pidA)
		}
		if err := txA.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(pids) < 2 {
		t.Errorf("the clients used backends %v; want at least two", pids)
	}

	cfg, err := pgx.ParseConfig(pooled)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["statement_timeout"] = "1000"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		conn.Close(context.Background())
		t.Errorf("a statement_timeout startup parameter was accepted; stock PgBouncer rejects it")
	} else if !strings.Contains(err.Error(), "unsupported startup parameter") {
		t.Errorf("statement_timeout startup parameter: %v; want PgBouncer's unsupported startup parameter", err)
	}
	// That installing the package leaves its service stopped and disabled
	// is localsvc's test (a real package whose postinst enables and
	// starts a service): the host's own state is not this test's.
}

// TestBouncerStops: Stop ends the bouncer and removes its directory.
func TestBouncerStops(t *testing.T) {
	t.Parallel()
	srv, err := ServerURL(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, err := StartBouncer(t.Context(), srv)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.dir); !os.IsNotExist(err) {
		t.Errorf("the bouncer's directory %s is still there (%v)", b.dir, err)
	}
	u, _ := b.PooledURL(srv)
	if err := ping(t.Context(), u); err == nil {
		t.Errorf("the bouncer still answers on port %d after Stop", b.port)
	}
}
