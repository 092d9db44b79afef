package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
)

// Bouncer is a PgBouncer in transaction mode (pool_mode = transaction) in
// front of the test server, the way production reaches PostgreSQL through
// PgBouncer or Supabase's Supavisor: every transaction may land on a
// different server connection, named prepared statements and session state
// do not survive a transaction, and only a few startup parameters are
// accepted.
//
// It runs Debian's pgbouncer (installed with apt-get when missing, like
// PostgreSQL; the package's own system service is stopped and disabled
// again) with PgBouncer's stock settings except: listening on 127.0.0.1 on a
// free port of its own, no unix socket, auth_type = any (the server trusts
// the test role), pool_mode = transaction and its files in a temporary
// directory. In particular ignore_startup_parameters is left empty: a client
// that sends a parameter stock PgBouncer rejects fails here as it would in
// production.
type Bouncer struct {
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// NewPooledDatabase creates a fresh migrated database (NewDatabase) and a
// PgBouncer in transaction mode in front of it (NewBouncer). It returns the
// database's direct URL (for the test's own checks and fixtures) and its URL
// through the pooler (for the code under test). Both are gone after the test.
func NewPooledDatabase(t testing.TB) (direct, pooled string) {
	t.Helper()
	direct = NewDatabase(t)
	return direct, NewBouncer(t).URL(t, direct)
}

// NewBouncer starts a PgBouncer in transaction mode in front of the test
// server (ServerURL) and stops it in t.Cleanup. Any failure is fatal.
func NewBouncer(t testing.TB) *Bouncer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	srv, err := ServerURL(ctx)
	if err != nil {
		t.Fatalf("pgtest: no PostgreSQL server for tests: %v", err)
	}
	return NewBouncerFor(t, srv, TransactionMode)
}

// URL returns the URL of dbURL's database (on the server the bouncer fronts)
// through the bouncer.
func (b *Bouncer) URL(t testing.TB, dbURL string) string {
	t.Helper()
	u, err := b.PooledURL(dbURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// PooledURL returns the URL of dbURL's database through the bouncer: same
// user and database, the bouncer's address.
func (b *Bouncer) PooledURL(dbURL string) (string, error) {
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return "", fmt.Errorf("parse database URL %s: %w", redact(dbURL), err)
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(cfg.User),
		Host:     "127.0.0.1:" + strconv.Itoa(b.port),
		Path:     "/" + cfg.Database,
		RawQuery: "sslmode=disable",
	}
	return u.String(), nil
}

// Port is the TCP port the bouncer listens on (on 127.0.0.1).
func (b *Bouncer) Port() int { return b.port }

// PoolMode is a PgBouncer pool_mode.
type PoolMode string

// The pool modes production meets: Supabase's pooler on port 6543 is in
// transaction mode, on port 5432 in session mode (the "session pooler",
// the IPv4 way to a session when the direct host is IPv6-only).
const (
	TransactionMode PoolMode = "transaction"
	SessionMode     PoolMode = "session"
)

// NewBouncerFor starts a PgBouncer in mode in front of the server at srv
// (any server, a Cluster's included) and stops it in t.Cleanup.
func NewBouncerFor(t testing.TB, srv string, mode PoolMode) *Bouncer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	b, err := StartBouncerMode(ctx, srv, mode)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return b
}

// StartBouncer starts a PgBouncer in transaction mode in front of the
// PostgreSQL server at srv (any database on it; the bouncer serves every
// database of the server under its own name) and returns once it accepts
// connections. Stop it with Stop.
func StartBouncer(ctx context.Context, srv string) (*Bouncer, error) {
	return StartBouncerMode(ctx, srv, TransactionMode)
}

// StartBouncerMode is StartBouncer with the pool mode.
func StartBouncerMode(ctx context.Context, srv string, mode PoolMode) (*Bouncer, error) {
	bin, err := findOrInstallPgbouncer(ctx)
	if err != nil {
		return nil, err
	}
	server, err := pgconn.ParseConfig(srv)
	if err != nil {
		return nil, fmt.Errorf("parse the server URL %s: %w", redact(srv), err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-pgbouncer-")
	if err != nil {
		return nil, err
	}
	owner, err := clusterOwner(ctx) // pgbouncer, like postgres, refuses to run as root
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if owner != nil {
		if err := owner.chown(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	conf := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(conf, []byte(bouncerConf(server, port, dir, mode)), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}

	b := &Bouncer{port: port, dir: dir, done: make(chan struct{})}
	b.cmd = exec.Command(bin, conf)
	b.cmd.Dir = dir
	if owner != nil {
		b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(owner.uid), Gid: uint32(owner.gid)}}
	}
	if err := b.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }()

	logPath := filepath.Join(dir, "pgbouncer.log")
	deadline := time.Now().Add(15 * time.Second)
	probe := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", url.PathEscape(server.User), port, url.PathEscape(server.Database))
	for {
		select {
		case <-b.done:
			err := fmt.Errorf("pgbouncer exited at start (%v); last lines of %s:\n%s", b.cmd.ProcessState, logPath, localsvc.Tail(logPath, 20))
			os.RemoveAll(dir)
			return nil, err
		default:
		}
		err := ping(ctx, probe)
		if err == nil {
			return b, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.Stop() //nolint:errcheck // reporting the start failure
			return nil, fmt.Errorf("pgbouncer started on port %d but does not answer: %w\nlast lines of %s:\n%s", port, err, logPath, localsvc.Tail(logPath, 20))
		}
		time.Sleep(50 * time.Millisecond) // polling for the listener, not waiting for time to pass
	}
}

// bouncerConf is the bouncer's configuration: stock PgBouncer except for the
// lines below.
func bouncerConf(server *pgconn.Config, port int, dir string, mode PoolMode) string {
	q := func(s string) string {
		return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
	}
	target := fmt.Sprintf("host=%s port=%d user=%s", q(server.Host), server.Port, q(server.User))
	if server.Password != "" {
		target += " password=" + q(server.Password)
	}
	return fmt.Sprintf(`;; Written by the engagement scheduler's internal/testkit/pgtest for one test.
;; Stock PgBouncer settings but for the ones below.
[databases]
;; Every database of the test server, under its own name, as the test role.
* = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = %s
logfile = %s
pidfile = %s
`, target, port, mode, filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
}

// Stop shuts the bouncer down (SIGINT, a safe shutdown that waits for the
// transactions in flight; SIGTERM after 10 seconds) and removes its files.
func (b *Bouncer) Stop() error {
	if b.cmd.Process == nil {
		return nil
	}
	defer os.RemoveAll(b.dir)
	_ = b.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-b.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
		return errors.New("pgbouncer did not stop on SIGINT nor SIGTERM; killed it")
	}
}

// findOrInstallPgbouncer finds the pgbouncer binary, installing Debian's
// pgbouncer package when it is missing. The package starts and enables a
// system service of its own; that is stopped and disabled again, so the
// machine is left with the binary only.
func findOrInstallPgbouncer(ctx context.Context) (string, error) {
	if bin, err := findPgbouncer(); err == nil {
		return bin, nil
	}
	unlock, err := localsvc.LockFile(ctx, filepath.Join(os.TempDir(), "engagement-pgtest-pgbouncer.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if bin, err := findPgbouncer(); err == nil {
		return bin, nil // a racing test process installed it
	}
	hint := "pgbouncer is not in PATH nor /usr/sbin; install the pgbouncer package (apt-get install --no-install-recommends pgbouncer)"
	if err := localsvc.AptInstall(ctx, "pgtest", "pgbouncer", hint, "pgbouncer"); err != nil {
		return "", err
	}
	return findPgbouncer()
}

func findPgbouncer() (string, error) {
	if bin, err := exec.LookPath("pgbouncer"); err == nil {
		return bin, nil
	}
	if isExecutable("/usr/sbin/pgbouncer") {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", errors.New("pgbouncer is neither in PATH nor in /usr/sbin")
}
