package postgres_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// TestClientErrorsAreNotLostConnections (issue 18, item 3): errors pgx
// raises in the client about the statement itself (a scan type mismatch, a
// column-count bug, an argument it cannot encode, no row) are the code's
// own, and a job must report them as they are. IsConnectionLost used to
// call every error the server did not send a lost connection, so such a
// batch was run four times over about 6 s and reported as "the database
// connection was lost 4 times in a row". Every error here comes from a real
// statement on a real server, through a pool made by Open, and the pool
// works afterwards.
func TestClientErrorsAreNotLostConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := postgres.Open(ctx, pgtest.NewDatabase(t), "engagement-lost-test")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tests := []struct {
		name string
		run  func() error
	}{
		{"scan type mismatch", func() error {
			var n int
			return pool.QueryRow(ctx, `SELECT 'seven'::text`).Scan(&n)
		}},
		{"NULL into an int", func() error {
			var n int
			return pool.QueryRow(ctx, `SELECT NULL::int`).Scan(&n)
		}},
		{"more columns than destinations", func() error {
			var n int
			return pool.QueryRow(ctx, `SELECT 1, 2`).Scan(&n)
		}},
		{"fewer columns than destinations, in a batch like a job's", func() error {
			// The shape of scheduler's batchRow: a statement (here a
			// setting's read, typed), then the batch's statement scanned
			// into its counters.
			var a, b, c int
			batch := &pgx.Batch{}
			fixture.QueueSetting(batch, "statement_timeout")
			batch.Queue(`SELECT 1, 2`).QueryRow(func(row pgx.Row) error { return row.Scan(&a, &b, &c) })
			return pool.SendBatch(ctx, batch).Close()
		}},
		{"an argument pgx cannot encode", func() error {
			_, err := pool.Exec(ctx, `SELECT $1::int`, struct{ N int }{7})
			return err
		}},
		{"no row", func() error {
			var n int
			return pool.QueryRow(ctx, `SELECT 1 WHERE false`).Scan(&n)
		}},
	}
	for _, tt := range tests {
		err := tt.run()
		if err == nil {
			t.Fatalf("%s: no error; the test needs one", tt.name)
		}
		if postgres.IsConnectionLost(err) {
			t.Errorf("%s: IsConnectionLost(%q) = true; want false: the connection is fine, the statement is wrong", tt.name, err)
		}
		if err := pool.Ping(ctx); err != nil {
			t.Fatalf("%s: the pool no longer works: %v", tt.name, err)
		}
	}
}

// TestRealConnectionLossesAreLost: what pgx returns when the connection
// really goes (ended with pg_terminate_backend, used again after that, cut
// in the network, or never made) counts as lost; a cancelled statement and
// one past its timeout do not.
func TestRealConnectionLossesAreLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.NewDatabase(t)

	t.Run("pg_terminate_backend, then the closed connection", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		admin, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(context.Background())
		if !fixture.PgTerminateBackend(t, admin, conn.PgConn().PID()) {
			t.Fatal("pg_terminate_backend: the backend did not end")
		}
		err = conn.Ping(ctx)
		if err == nil || !postgres.IsConnectionLost(err) {
			t.Errorf("a statement on a terminated session: IsConnectionLost(%v) = false, want true", err)
		}
		err = conn.Ping(ctx)
		if err == nil || !postgres.IsConnectionLost(err) {
			t.Errorf("a statement on the closed connection: IsConnectionLost(%v) = false, want true", err)
		}
	})

	t.Run("the network cut mid-session", func(t *testing.T) {
		config, err := pgx.ParseConfig(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		p := newCutProxy(t, net.JoinHostPort(config.Host, strconv.Itoa(int(config.Port))))
		config.Host, config.Port = "127.0.0.1", p.port()
		conn, err := pgx.ConnectConfig(ctx, config)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		p.cut()
		err = conn.Ping(ctx)
		if err == nil || !postgres.IsConnectionLost(err) {
			t.Errorf("a statement after the network was cut: IsConnectionLost(%v) = false, want true", err)
		}
	})

	t.Run("no server listening", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = pgx.Connect(cctx, "postgres://postgres@"+addr+"/postgres?connect_timeout=5")
		if err == nil || !postgres.IsConnectionLost(err) {
			t.Errorf("a connect refused: IsConnectionLost(%v) = false, want true", err)
		}
	})

	t.Run("not lost: cancelled, timed out, wrong database", func(t *testing.T) {
		pool, err := postgres.Open(ctx, dbURL, "engagement-lost-test")
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel) // mid-statement
		if err := fixture.PgSleep(cctx, pool, 30); err == nil || postgres.IsConnectionLost(err) {
			t.Errorf("a cancelled statement: IsConnectionLost(%v) = true, want false", err)
		}
		if err := fixture.PgSleep(postgres.WithStatementTimeout(ctx, 50*time.Millisecond), pool, 30); err == nil || postgres.IsConnectionLost(err) {
			t.Errorf("a statement past its timeout: IsConnectionLost(%v) = true, want false", err)
		}
		config, err := pgx.ParseConfig(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		config.Database = "no_such_database_issue_18"
		if _, err := pgx.ConnectConfig(ctx, config); err == nil || postgres.IsConnectionLost(err) {
			t.Errorf("a connect to a database that does not exist: IsConnectionLost(%v) = true, want false", err)
		}
	})
}

// cutProxy forwards TCP connections to a server until cut, which closes
// every connection it carries: the network failing under a session.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(server, client); server.Close() }()
			go func() { _, _ = io.Copy(client, server); client.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
