package migrations

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// concurrentIndex is an index one of the embedded migrations builds with
// CREATE INDEX CONCURRENTLY, in a file of its own.
type concurrentIndex struct {
	version uint
	name    string // the index
	table   string // the table it indexes
	create  string // the migration's statement: CREATE INDEX CONCURRENTLY IF NOT EXISTS …
	// droppedLater is set when a later up migration drops the index: its
	// absence is then no damage to repair.
	droppedLater bool
}

// createConcurrently matches a file holding one CREATE INDEX CONCURRENTLY
// statement (after its comments are removed) and captures the index and
// the table.
var createConcurrently = regexp.MustCompile(`(?is)^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s+ON\s+(?:ONLY\s+)?(\w+)[^;]*;?\s*$`)

var sqlComment = regexp.MustCompile(`--[^\n]*`)

// runsConcurrently matches a file that cannot run in a transaction.
var runsConcurrently = regexp.MustCompile(`(?i)\bCONCURRENTLY\b`)

// parseConcurrentIndex reports the index a migration's body builds
// CONCURRENTLY, if that is all it does.
func parseConcurrentIndex(body []byte) (concurrentIndex, bool) {
	m := createConcurrently.FindSubmatch(sqlComment.ReplaceAll(body, nil))
	if m == nil {
		return concurrentIndex{}, false
	}
	return concurrentIndex{name: string(m[1]), table: string(m[2]), create: string(body)}, true
}

// concurrentIndexes are the indexes the embedded up migrations build
// CONCURRENTLY: the only ones a failed or interrupted migration can leave
// INVALID. Found on first use, not at start: reading every migration's
// body through regular expressions was most of every binary's start-up
// (issue 42: a SIGTERM in that time found no handler yet, exit 143).
var concurrentIndexes = sync.OnceValue(embeddedConcurrentIndexes)

func embeddedConcurrentIndexes() []concurrentIndex {
	entries, _ := fs.ReadDir(files, ".") // fixed at build time; cannot fail
	var out []concurrentIndex
	for _, e := range entries {
		m, err := source.DefaultParse(e.Name())
		if err != nil || m.Direction != source.Up {
			continue
		}
		body, _ := fs.ReadFile(files, e.Name())
		if idx, ok := parseConcurrentIndex(body); ok {
			idx.version = m.Version
			out = append(out, idx)
		}
	}
	for i, idx := range out {
		drop := regexp.MustCompile(`(?is)DROP\s+INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+EXISTS\s+)?` + idx.name + `\b`)
		for _, e := range entries {
			m, err := source.DefaultParse(e.Name())
			if err != nil || m.Direction != source.Up || m.Version <= idx.version {
				continue
			}
			body, _ := fs.ReadFile(files, e.Name())
			out[i].droppedLater = out[i].droppedLater || drop.Match(sqlComment.ReplaceAll(body, nil))
		}
	}
	return out
}

// guardedDriver is golang-migrate's PostgreSQL driver with two additions:
// a migration the server refused is undone (the version goes back to the
// one before, clean), and an index is built CONCURRENTLY only once the
// transactions writing to its table are done.
type guardedDriver struct {
	database.Driver
	mg *Migrator
	// from and to are the versions before and after the migration in
	// progress (golang-migrate marks "to" dirty, runs, marks it clean);
	// -1 is no version.
	from, to int
}

// SetVersion records the migration about to run when golang-migrate marks
// it dirty, and writes the version as golang-migrate's driver does (the
// table's one row; none for database.NilVersion unless dirty), but with a
// DELETE where the driver runs TRUNCATE: twice a migration, a TRUNCATE
// makes the table a new file, some 5 ms of the server's time each, a
// third of a migration from scratch.
func (d *guardedDriver) SetVersion(version int, dirty bool) error {
	if dirty {
		from, _, err := d.Driver.Version()
		if err != nil {
			return err
		}
		d.from, d.to = from, version
	}
	err := d.mg.withConn(d.mg.ctx, func(conn *pgx.Conn) error {
		return pgx.BeginFunc(d.mg.ctx, conn, func(tx pgx.Tx) error {
			if _, err := versionClearQuery.WithMode(pgx.QueryExecModeSimpleProtocol).Exec(d.mg.ctx, tx, sqlfile.None{}); err != nil {
				return err
			}
			if version < 0 && !(version == database.NilVersion && dirty) {
				return nil
			}
			_, err := versionWriteQuery.WithMode(pgx.QueryExecModeSimpleProtocol).Exec(d.mg.ctx, tx,
				versionWriteArgs{Version: int64(version), Dirty: dirty})
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("set the schema version to %d (dirty %v): %w", version, dirty, err)
	}
	return nil
}

// Run runs one migration file. When the server refuses it, nothing of it
// stays (a file is one transaction, or one CONCURRENTLY statement whose
// INVALID leftover is dropped here or rebuilt by the next Up), so the
// schema goes back to the version before, clean. Any other failure (the
// connection was lost) leaves the version dirty: whether the file
// committed is unknown.
func (d *guardedDriver) Run(migration io.Reader) error {
	body, err := io.ReadAll(migration)
	if err != nil {
		return fmt.Errorf("read migration: %w", err)
	}
	idx, concurrent := parseConcurrentIndex(body)
	if concurrent {
		if err := d.mg.awaitWriters(idx.table); err != nil {
			return d.undo(err)
		}
		err = d.Driver.Run(bytes.NewReader(body))
	} else if runsConcurrently.Match(sqlComment.ReplaceAll(body, nil)) {
		err = d.Driver.Run(bytes.NewReader(body)) // a DROP INDEX CONCURRENTLY: no transaction, no writer waits on it
	} else {
		err = d.runInAttempts(body)
	}
	if err == nil {
		return nil
	}
	pgErr := serverError(err)
	if pgErr == nil {
		return err
	}
	err = d.mg.describe(pgErr)
	if concurrent {
		if dropErr := d.mg.dropIfInvalid(idx); dropErr != nil {
			err = fmt.Errorf("%w; it left the INVALID index %s, which could not be dropped now (%w) and is rebuilt by the next engagementctl migrate up",
				err, idx.name, dropErr)
		}
	}
	return d.undo(err)
}

// lockAttempt bounds one attempt's wait for a lock in a transactional
// migration. An ALTER TABLE waiting for a lock queues every later writer
// of the table behind it: the bot's writes wait as long as the migration
// does. So a migration waits at most this long, gives way (rolled back
// whole) for pollInterval, and tries again, until Config.LockTimeout has
// passed in all.
const lockAttempt = time.Second

// runInAttempts runs a transactional migration file, each attempt with a
// lock_timeout of lockAttempt (local to its transaction), again after a
// lock timeout until Config.LockTimeout is spent.
func (d *guardedDriver) runInAttempts(body []byte) error {
	cfg := d.mg.cfg
	attempt := lockAttempt
	if cfg.LockTimeout > 0 {
		attempt = min(attempt, cfg.LockTimeout)
	}
	limited := append([]byte(fmt.Sprintf("SELECT set_config('lock_timeout', '%d', true);\n", max(attempt.Milliseconds(), 1))), body...)
	deadline := time.Now().Add(cfg.LockTimeout)
	for {
		err := d.Driver.Run(bytes.NewReader(limited))
		pgErr := serverError(err)
		if pgErr == nil || pgErr.Code != "55P03" || cfg.LockTimeout > 0 && !time.Now().Add(pollInterval).Before(deadline) {
			return err
		}
		if err := sleep(d.mg.ctx, pollInterval); err != nil {
			return err
		}
	}
}

// undo puts the version back to the one before the failed migration, clean.
func (d *guardedDriver) undo(cause error) error {
	migration := d.to
	if d.to < d.from {
		migration = d.from // a down migration
	}
	if err := d.Driver.SetVersion(d.from, false); err != nil {
		return fmt.Errorf("migration %d failed: %w; marking it undone failed too (the schema stays dirty): %w", migration, cause, err)
	}
	return fmt.Errorf("migration %d failed and was undone, the schema stays at version %d: %w", migration, max(d.from, 0), cause)
}

// serverError is the PostgreSQL error inside a golang-migrate error, if the
// server refused a statement (rather than the connection failing).
func serverError(err error) *pgconn.PgError {
	var dbErr database.Error
	if errors.As(err, &dbErr) {
		err = dbErr.OrigErr
	}
	var dbErrPtr *database.Error
	if errors.As(err, &dbErrPtr) {
		err = dbErrPtr.OrigErr
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	return nil
}

// describe is a server error as one line, with a hint for a lock timeout.
func (mg *Migrator) describe(pgErr *pgconn.PgError) error {
	if pgErr.Code == "55P03" { // lock_not_available
		return fmt.Errorf("%s (SQLSTATE %s): it waited over the lock timeout of %s for another transaction "+
			"(one holding a lock on a table it needs or, for an index built CONCURRENTLY, any older one still running); "+
			"retry when that transaction is done, or raise --lock-timeout", pgErr.Message, pgErr.Code, mg.cfg.LockTimeout)
	}
	return fmt.Errorf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
}

// awaitWriters waits until every transaction that was writing to table when
// it was called has ended, up to the lock timeout: what CREATE INDEX
// CONCURRENTLY waits for before it builds anything. A transaction kept open
// past the timeout fails the migration before the index exists, instead of
// leaving it INVALID. Transactions that start meanwhile do not count (the
// build does not wait for them either).
func (mg *Migrator) awaitWriters(table string) error {
	ctx := mg.ctx
	writers := func() (map[string]uint32, error) {
		got := map[string]uint32{}
		err := writersQuery.Each(ctx, mg.gate, writersArgs{Table: table}, func(w *writersRow) error {
			got[w.Virtualtransaction] = uint32(w.PID)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("look for transactions writing to %s: %w", table, err)
		}
		return got, nil
	}
	waitFor, err := writers()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(mg.cfg.LockTimeout)
	for len(waitFor) > 0 {
		if mg.cfg.LockTimeout > 0 && time.Now().After(deadline) {
			var pids []string
			for _, pid := range waitFor {
				pids = append(pids, fmt.Sprint(pid))
			}
			slices.Sort(pids)
			return fmt.Errorf("a transaction writing to %s (pid %s) stayed open for over the lock timeout of %s, so its index was not started; "+
				"retry when that transaction is done, or raise --lock-timeout", table, strings.Join(pids, ", "), mg.cfg.LockTimeout)
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return fmt.Errorf("wait for the transactions writing to %s: %w", table, err)
		}
		now, err := writers()
		if err != nil {
			return err
		}
		for vxid := range waitFor {
			if _, still := now[vxid]; !still {
				delete(waitFor, vxid)
			}
		}
	}
	return nil
}

func (mg *Migrator) indexState(idx concurrentIndex) (string, error) {
	row, err := indexStateQuery.One(mg.ctx, mg.gate, indexStateArgs{Index: idx.name})
	if err != nil {
		return "", fmt.Errorf("check index %s: %w", idx.name, err)
	}
	return row.State, nil
}

// dropIfInvalid drops idx CONCURRENTLY if it exists and is INVALID.
func (mg *Migrator) dropIfInvalid(idx concurrentIndex) error {
	state, err := mg.indexState(idx)
	if err != nil || state != "invalid" {
		return err
	}
	drop := `DROP INDEX CONCURRENTLY IF EXISTS ` + pgx.Identifier{idx.name}.Sanitize()
	if _, err := mg.gate.Exec(mg.ctx, drop, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("drop INVALID index %s: %w", idx.name, mg.statementError(err))
	}
	return nil
}

// rebuildIndexes repairs what failed CONCURRENTLY builds left, before Up
// applies anything: an INVALID index of the embedded migrations is dropped
// (IF NOT EXISTS alone would keep it for ever), and an index of an applied
// migration (at version or before) that is INVALID or missing is built
// again with that migration's own statement. A pending migration builds its
// own index.
func (mg *Migrator) rebuildIndexes(version uint) error {
	for _, idx := range concurrentIndexes() {
		state, err := mg.indexState(idx)
		if err != nil {
			return err
		}
		applied := idx.version <= version
		if state == "valid" || state == "missing" && (!applied || idx.droppedLater) {
			continue
		}
		if state == "invalid" {
			if err := mg.awaitWriters(idx.table); err != nil {
				return fmt.Errorf("drop INVALID index %s: %w", idx.name, err)
			}
			if err := mg.dropIfInvalid(idx); err != nil {
				return err
			}
		}
		if !applied {
			continue
		}
		if err := mg.awaitWriters(idx.table); err != nil {
			return fmt.Errorf("rebuild index %s (migration %d): %w", idx.name, idx.version, err)
		}
		if _, err := mg.gate.Exec(mg.ctx, idx.create, pgx.QueryExecModeSimpleProtocol); err != nil {
			err = mg.statementError(err)
			if dropErr := mg.dropIfInvalid(idx); dropErr != nil {
				err = fmt.Errorf("%w; the INVALID index it left could not be dropped now (%w)", err, dropErr)
			}
			return fmt.Errorf("rebuild index %s (migration %d): %w; engagementctl migrate up tries again", idx.name, idx.version, err)
		}
	}
	return nil
}

// statementError is err as describe puts it when the server refused the
// statement.
func (mg *Migrator) statementError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return mg.describe(pgErr)
	}
	return err
}
