package pgtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/migrations"
)

// TestNewTx: parallel tests get transactions on one migrated database,
// see none of each other's rows, and leave none behind.
func TestNewTx(t *testing.T) {
	t.Parallel()
	var (
		mu        sync.Mutex
		databases = map[string]bool{}
		ids       []string
	)
	t.Run("group", func(t *testing.T) {
		for i := range 4 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				tx := NewTx(t)
				db := currentDatabase(t, tx)
				if !strings.HasPrefix(db, sharedPrefix) {
					t.Errorf("database %q lacks the prefix %q", db, sharedPrefix)
				}
				if err := migrations.Check(ctx, tx); err != nil {
					t.Errorf("schema of %s: %v", db, err)
				}
				id := addProfile(t, tx)
				if n := countProfiles(t, tx); n != 1 {
					t.Errorf("the test sees %d user_profiles rows, want its own 1", n)
				}
				mu.Lock()
				databases[db] = true
				ids = append(ids, id)
				mu.Unlock()
			})
		}
	})
	if len(databases) != 1 {
		t.Errorf("the tests ran on %d databases %v, want one shared", len(databases), databases)
	}
	tx := NewTx(t)
	if n := countProfiles(t, tx, ids...); n != 0 {
		t.Errorf("%d rows of ended tests are still there, want 0: rolled back", n)
	}
	if len(ids) != 4 {
		t.Errorf("%d tests inserted a row, want 4", len(ids))
	}
}

// TestNewTxSavepointKeepsTheTransaction: a statement that fails in
// pgx.BeginFunc rolls back to its savepoint; the test's transaction goes
// on, with what it wrote before.
func TestNewTxSavepointKeepsTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tx := NewTx(t)
	addProfile(t, tx)
	err := pgx.BeginFunc(ctx, tx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT 1/0`)
		return err
	})
	if err == nil {
		t.Fatal("1/0 did not fail")
	}
	if n := countProfiles(t, tx); n != 1 {
		t.Errorf("after the failed savepoint: %d rows; want the 1 written before", n)
	}
}

// recorder is a testing.TB whose failures and cleanups are kept, to check
// what NewTx does to the test that misuses it.
type recorder struct {
	testing.TB
	failures []string
	cleanups []func()
}

func (r *recorder) Helper()           {}
func (r *recorder) Cleanup(f func())  { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Error(args ...any) { r.failures = append(r.failures, fmt.Sprint(args...)) }
func (r *recorder) Errorf(f string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(f, args...))
}
func (r *recorder) Fatalf(f string, args ...any) { r.TB.Fatalf(f, args...) }
func (r *recorder) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestNewTxRefusesACommit: Commit fails the test and commits nothing;
// a COMMIT sent as SQL fails it at cleanup.
func TestNewTxRefusesACommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	r := &recorder{TB: t}
	tx := NewTx(r)
	id := addProfile(t, tx)
	if err := tx.Commit(ctx); !errors.Is(err, errCommit) || len(r.failures) != 1 {
		t.Errorf("Commit = %v, test failures %q; want errCommit and one failure", err, r.failures)
	}
	r.cleanup()
	check := NewTx(t)
	if n := countProfiles(t, check, id); n != 0 {
		t.Errorf("the refused commit left %d rows, want 0", n)
	}

	r = &recorder{TB: t}
	tx = NewTx(r)
	if _, err := tx.Exec(ctx, `COMMIT`); err != nil { // an empty transaction: nothing is left behind
		t.Fatal(err)
	}
	r.cleanup()
	if len(r.failures) != 1 || !strings.Contains(r.failures[0], "committed") {
		t.Errorf("after COMMIT as SQL, test failures %q; want one saying the test committed", r.failures)
	}
}

// TestSharedDatabasesOfEndedProcessesAreDropped: making a shared database
// drops those whose process has ended (their lock is free) and keeps those
// of running processes.
func TestSharedDatabasesOfEndedProcessesAreDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := ServerURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := ensureTemplate(ctx, srv)
	if err != nil {
		t.Fatal(err)
	}
	admin := connectT(t, srv)
	ended, running, made := sharedPrefix+"ended"+randomHex(4), sharedPrefix+"running"+randomHex(4), sharedPrefix+"made"+randomHex(4)
	other := connectT(t, srv) // the running process, which locks before it creates
	if _, err := kitSharedLockQuery.Exec(ctx, other, kitSharedLockArgs{Class: int(sharedLockClass), Datname: running}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ended, running} {
		if _, err := admin.Exec(ctx, `CREATE DATABASE `+quote(name)+` TEMPLATE template0`); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range []string{ended, running, made} {
			if err := dropDatabase(context.Background(), srv, name); err != nil {
				t.Error(err)
			}
		}
	})
	holder := connectT(t, srv)
	if _, err := makeShared(ctx, holder, srv, made, tmpl); err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, name := range databasesLike(ctx, admin, sharedPrefix) {
		left[name] = true
	}
	if left[ended] || !left[running] || !left[made] {
		t.Errorf("after making %s: ended process's database there %v, running's %v, made %v; want false, true, true",
			made, left[ended], left[running], left[made])
	}
}
