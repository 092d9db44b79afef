package pgtest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

const (
	// sharedPrefix names the shared database of a test process (NewTx).
	sharedPrefix = "engagement_shared_"

	// sharedLockClass is the first key of the two-key pg_advisory_lock a
	// test process holds, on a connection of its own, for as long as it
	// runs; the second is hashtext(its shared database's name). A shared
	// database whose lock is free belongs to a process that has ended
	// ("shrd").
	sharedLockClass int32 = 0x73687264
)

// shared is the process's shared database (NewTx): made once, on first
// use, and then used by every NewTx of the process.
var shared struct {
	sync.Mutex
	pool   *pgxpool.Pool
	holder *pgx.Conn // holds the database's advisory lock while the process runs
}

// NewTx returns a transaction on a migrated database shared by every test
// of the process, rolled back in t.Cleanup: River's riverdbtest.TestTx.
// No database is copied for the test (NewDatabase copies one per call),
// so a test that never needs to commit runs in a fraction of the time.
//
// Use it when the code under test takes a postgres.Querier or a pgx.Tx
// (the test passes the transaction) and:
//
//   - never commits, and never opens connections of its own (a pool, a
//     binary, psql, a second session): nothing outside the transaction
//     sees its rows;
//   - does not rely on now() differing between statements: now() is the
//     transaction's start, the same for every statement;
//   - takes no advisory lock, or other lock, that another session is
//     meant to see, and changes no schema (DDL would lock the tables
//     every parallel test uses);
//   - does not go on after a statement it expects to fail: an error aborts
//     the transaction. Run such a call in a savepoint,
//     pgx.BeginFunc(ctx, tx, …), which rolls back to it on an error as a
//     statement on its own would.
//
// Rows of parallel tests are invisible to each other, but a unique value
// two of them insert makes the second wait for the first to end: give
// unique columns values of the test's own (fixture.NewID, a user's id).
// Committing (tx.Commit) fails the test.
//
// The shared database, engagement_shared_<hex>, is a copy of the migrated
// template made on the first call and left when the process ends; the
// next process that makes its own drops it.
func NewTx(t testing.TB) pgx.Tx {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	pool, err := sharedPool(ctx)
	if err != nil {
		t.Fatalf("pgtest: the shared test database: %v", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatalf("pgtest: a connection to the shared test database: %v", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		conn.Release()
		t.Fatalf("pgtest: begin a transaction on the shared test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if tx.Conn().PgConn().TxStatus() == 'I' {
			// COMMIT sent as SQL (tx.Commit is refused below): what the
			// test wrote is in the shared database for good.
			t.Errorf("pgtest: the test committed its NewTx transaction; a test that commits needs NewPool")
			_ = conn.Conn().Close(ctx) // the pool drops a closed connection
			conn.Release()
			return
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Errorf("pgtest: roll back the test's transaction: %v", err)
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	})
	return rollbackOnly{Tx: tx, t: t}
}

// rollbackOnly is NewTx's transaction: Commit fails the test. A nested
// transaction (Begin, a savepoint) commits as usual.
type rollbackOnly struct {
	pgx.Tx
	t testing.TB
}

// errCommit is what Commit returns on NewTx's transaction.
var errCommit = errors.New("pgtest: NewTx's transaction is rolled back at the end of the test; a test that commits needs NewPool")

// Commit fails the test and commits nothing.
func (tx rollbackOnly) Commit(context.Context) error {
	tx.t.Helper()
	tx.t.Error(errCommit)
	return errCommit
}

// sharedPool returns the pool on the process's shared database, making the
// database first if need be.
func sharedPool(ctx context.Context) (*pgxpool.Pool, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.pool != nil {
		return shared.pool, nil
	}
	srv, err := ServerURL(ctx)
	if err != nil {
		return nil, err
	}
	tmpl, err := ensureTemplate(ctx, srv)
	if err != nil {
		return nil, fmt.Errorf("prepare the template database on %s: %w", redact(srv), err)
	}
	holder, err := connect(ctx, srv)
	if err != nil {
		return nil, err
	}
	name := sharedPrefix + fmt.Sprintf("%08x", uint32(time.Now().Unix())) + randomHex(4)
	dbURL, err := makeShared(ctx, holder, srv, name, tmpl)
	if err != nil {
		holder.Close(context.Background())
		return nil, err
	}
	cfg, err := postgres.PoolConfig(ctx, dbURL, "pgtest")
	if err != nil {
		holder.Close(context.Background())
		return nil, fmt.Errorf("parse %s: %w", redact(dbURL), err)
	}
	// The binaries' settings (exec mode above all), but each test holds
	// one connection for its whole run: room for every parallel test, and
	// for a few that use two.
	cfg.MaxConns = int32(max(8, 4*runtime.GOMAXPROCS(0)))
	pool, err := pgxpool.NewWithConfig(ctx, cfg) // not the binaries' pool: postgres.PoolConfig's, with room for every test
	if err != nil {
		holder.Close(context.Background())
		return nil, fmt.Errorf("open a pool on %s: %w", redact(dbURL), err)
	}
	shared.pool, shared.holder = pool, holder
	return pool, nil
}

// makeShared takes name's advisory lock on holder, drops the shared
// databases of processes that have ended (their locks are free), and
// creates name from the template tmpl.
func makeShared(ctx context.Context, holder *pgx.Conn, srv, name, tmpl string) (string, error) {
	if _, err := kitSharedLockQuery.Exec(ctx, holder, kitSharedLockArgs{Class: int(sharedLockClass), Datname: name}); err != nil {
		return "", fmt.Errorf("take the lock of %s: %w", name, err)
	}
	for _, other := range databasesLike(ctx, holder, sharedPrefix) {
		if lock, err := kitSharedTryLockQuery.One(ctx, holder, kitSharedTryLockArgs{Class: int(sharedLockClass), Datname: other}); err != nil || lock.Free == nil || !*lock.Free {
			continue // in use by a running process
		}
		holder.Exec(ctx, `DROP DATABASE IF EXISTS `+quote(other)+` WITH (FORCE)`)                                //nolint:errcheck // best effort
		kitSharedUnlockQuery.Exec(ctx, holder, kitSharedUnlockArgs{Class: int(sharedLockClass), Datname: other}) //nolint:errcheck // best effort
	}
	if err := createFromTemplate(ctx, holder, srv, name, tmpl); err != nil {
		return "", fmt.Errorf("create database %s from template %s on %s: %w", name, tmpl, redact(srv), err)
	}
	return WithDatabase(srv, name)
}
