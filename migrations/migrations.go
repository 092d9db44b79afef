// Package migrations holds the engagement scheduler's database schema as
// golang-migrate SQL files embedded in the binary, and applies them.
//
// Files are named NNNNNN_name.up.sql / NNNNNN_name.down.sql. Each file is
// either one implicit transaction (several statements, all or nothing) or a
// single CREATE/DROP INDEX CONCURRENTLY statement with IF [NOT] EXISTS,
// which cannot run in a transaction and so needs a file of its own.
//
// Applying them is safe on a live database and with several migrators at
// once (see docs/migrations.md):
//
//   - Migrators queue on a gate, a session advisory lock that waiters poll
//     with pg_try_advisory_lock between statements instead of waiting for
//     it inside one. A waiter inside a statement holds a snapshot, which
//     CREATE INDEX CONCURRENTLY must wait for, while it waits for the
//     gate's holder to finish that very index: a deadlock, which is what
//     golang-migrate's own pg_advisory_lock gave two concurrent migrators.
//     golang-migrate still takes its lock, always uncontended, under the
//     gate.
//   - A transactional migration waits at most a second at a time for a
//     lock (lockAttempt), then is rolled back and tried again, so the
//     bot's writes queued behind its ALTER TABLE are never held long; a
//     table the bot keeps locked for longer than Config.LockTimeout in all
//     fails the migration instead of stalling it, and everything queued
//     behind it, for ever.
//   - A migration the server refused is undone: a transactional file rolled
//     back on its own, so the version goes back to the one before, clean,
//     never dirty. Before building an index CONCURRENTLY, the migrator
//     waits (up to the lock timeout) for the transactions writing to its
//     table, so a table kept locked fails before the build begins and no
//     INVALID index is left; an index that still came out INVALID is
//     dropped, or rebuilt by the next Up.
//   - Only a migrator that died or lost its connection half-way leaves the
//     schema dirty; Up then refuses with one line naming `engagementctl
//     migrate force`.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

//go:embed *.sql
var files embed.FS

// The package's own statements (not migrations) are its queries/*.sql
// files, typed in queries.gen.go (make sql). They read the catalogs, or
// the bot's tables only once a column is known to exist, so they run on a
// database the migrations have not touched yet.

// Table is the table golang-migrate records the schema version in. It is not
// the default schema_migrations, so the scheduler can share a database with
// the bot's own migrations.
const Table = "engagement_schema_migrations"

// Fingerprint is a SHA-256 of the embedded migration files' names and
// contents, in hex: two binaries with the same fingerprint apply the same
// migrations (the test kit names its template databases after it).
func Fingerprint() string {
	h := sha256.New()
	names, _ := fs.Glob(files, "*.sql") // sorted; the pattern is valid
	for _, n := range names {
		b, _ := files.ReadFile(n)
		fmt.Fprintf(h, "%s %d\n%s\n", n, len(b), b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Latest is the highest schema version embedded in this binary.
var Latest = latestVersion()

// ErrSchemaOutdated reports a database whose schema is missing, dirty or older
// than this binary needs.
var ErrSchemaOutdated = errors.New("database schema is not up to date")

// ErrHiddenByRLS reports a role that row level security leaves looking at
// empty tables: it has no policy on them.
var ErrHiddenByRLS = errors.New("row level security hides the tables' rows from this role")

// ErrUnknownVersion reports a version given to Force that no embedded
// migration has.
var ErrUnknownVersion = errors.New("no such schema version")

// Defaults of Config.
const (
	DefaultLockTimeout = 10 * time.Second
	DefaultWaitTimeout = 30 * time.Minute
)

// pollInterval is how often a waiting migrator asks again for the gate, and
// how often the wait for a table's writers looks again.
const pollInterval = 200 * time.Millisecond

// Config says how long a Migrator waits. Zero fields take the defaults.
type Config struct {
	// LockTimeout is how long a migration may wait in all for a lock
	// another transaction holds (the bot's) before it fails and is undone:
	// PostgreSQL's lock_timeout for a CONCURRENTLY statement, the budget of
	// a transactional file's attempts (each of at most a second). Default
	// DefaultLockTimeout; negative means no limit.
	LockTimeout time.Duration
	// WaitTimeout bounds the wait for another migrator to finish. Default
	// DefaultWaitTimeout.
	WaitTimeout time.Duration
	// Waiting, if set, is called once when another migrator holds the gate
	// and this one starts waiting for it.
	Waiting func()
}

func (c Config) withDefaults() Config {
	if c.LockTimeout == 0 {
		c.LockTimeout = DefaultLockTimeout
	}
	if c.WaitTimeout <= 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	if c.Waiting == nil {
		c.Waiting = func() {}
	}
	return c
}

// lockTimeoutSetting is c.LockTimeout as a lock_timeout value (ms; 0 is no limit).
func (c Config) lockTimeoutSetting() string {
	if c.LockTimeout < 0 {
		return "0"
	}
	return strconv.FormatInt(max(c.LockTimeout.Milliseconds(), 1), 10)
}

// Migrator applies the embedded migrations to one database.
type Migrator struct {
	ctx     context.Context
	cfg     Config
	connCfg *pgx.ConnConfig
	db      *sql.DB

	// Set up under the gate by the first operation that needs them.
	m   *migrate.Migrate
	drv *guardedDriver
	// gate is the connection holding the gate during an operation.
	gate *pgx.Conn
}

// Open connects to the database and prepares the embedded migrations, with
// the default Config. Unless the URL sets connect_timeout, connecting gives
// up after postgres.ConnectTimeout(ctx) (postgres.DefaultConnectTimeout
// unless the caller set another), as every other connection does.
func Open(ctx context.Context, databaseURL string) (*Migrator, error) {
	return OpenConfig(ctx, databaseURL, Config{})
}

// OpenConfig is Open with a Config. ctx bounds every wait of the
// Migrator's operations (for the gate, for a table's writers).
func OpenConfig(ctx context.Context, databaseURL string, cfg Config) (*Migrator, error) {
	config, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	if config.ConnectTimeout == 0 {
		// Without it, a server that accepts and never answers hangs
		// engagementctl migrate forever.
		config.ConnectTimeout = postgres.ConnectTimeout(ctx)
	}
	cfg = cfg.withDefaults()
	mg := &Migrator{ctx: ctx, cfg: cfg, connCfg: config}
	mg.db = stdlib.OpenDB(*config, stdlib.OptionAfterConnect(mg.setLockTimeout))
	if err := mg.db.PingContext(ctx); err != nil {
		mg.db.Close()
		return nil, err
	}
	return mg, nil
}

// setLockTimeout applies Config.LockTimeout to a new session.
func (mg *Migrator) setLockTimeout(ctx context.Context, conn *pgx.Conn) error {
	_, err := setLockTimeoutQuery.WithMode(pgx.QueryExecModeSimpleProtocol).Exec(ctx, conn,
		setLockTimeoutArgs{LockTimeout: mg.cfg.lockTimeoutSetting()})
	if err != nil {
		return fmt.Errorf("set lock_timeout: %w", err)
	}
	return nil
}

// Up applies every pending migration, after repairing the indexes earlier
// failed or interrupted runs left INVALID (see rebuildIndexes). An up-to-date database is not an error.
func (mg *Migrator) Up() error {
	return mg.lockedAfter("migrate up", mg.refuseIncompatible, func() error {
		version, err := mg.cleanVersion()
		if err != nil {
			return err
		}
		if err := mg.rebuildIndexes(version); err != nil {
			return err
		}
		if err := mg.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return mg.explain(err)
		}
		return nil
	})
}

// Down rolls back the n most recent migrations.
func (mg *Migrator) Down(n int) error {
	if n <= 0 {
		return fmt.Errorf("migrate down: steps must be positive, got %d", n)
	}
	return mg.locked("migrate down", func() error {
		version, err := mg.cleanVersion()
		if err != nil || version == 0 {
			return err // nothing applied, nothing to roll back
		}
		if err := mg.m.Steps(-n); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			var short migrate.ErrShortLimit
			if errors.As(err, &short) {
				return nil // fewer than n applied: everything is rolled back, which is what was asked
			}
			return mg.explain(err)
		}
		return nil
	})
}

// DownAll rolls back every migration.
func (mg *Migrator) DownAll() error {
	return mg.locked("migrate down", func() error {
		if _, err := mg.cleanVersion(); err != nil {
			return err
		}
		if err := mg.m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return mg.explain(err)
		}
		return nil
	})
}

// Force records version as the applied schema version, clean, without
// running any migration: the repair of a dirty schema once the operator has
// checked what the interrupted migration did. 0 means no migration applied.
// A version no embedded migration has is ErrUnknownVersion.
func (mg *Migrator) Force(version uint) error {
	if version != 0 && !slices.Contains(versions, version) {
		return fmt.Errorf("%w: %d (this binary knows 0 to %d)", ErrUnknownVersion, version, Latest)
	}
	return mg.locked("migrate force", func() error {
		v := int(version)
		if version == 0 {
			v = -1 // golang-migrate's "no version"
		}
		return mg.m.Force(v)
	})
}

// Version reports the applied schema version (0 when none) and whether the
// last migration was interrupted half-way (dirty). It does not wait for a
// migrator that is running.
func (mg *Migrator) Version() (version uint, dirty bool, err error) {
	err = mg.withConn(mg.ctx, func(conn *pgx.Conn) error {
		version, dirty, err = readVersion(mg.ctx, conn)
		return err
	})
	return version, dirty, err
}

func readVersion(ctx context.Context, conn *pgx.Conn) (version uint, dirty bool, err error) {
	hidden, err := hiddenTablesQuery.All(ctx, conn, sqlfile.None{})
	if err != nil {
		return 0, false, fmt.Errorf("check row level security: %w", err)
	}
	if slices.ContainsFunc(hidden, func(h hiddenTablesRow) bool { return h.TableName == Table }) {
		return 0, false, hiddenError([]string{Table})
	}
	v, err := schemaVersionQuery.One(ctx, conn, sqlfile.None{})
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && pgErr.Code == "42P01":
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("read schema version: %w", err)
	case v.Version < 0:
		return 0, v.Dirty, nil
	}
	return uint(v.Version), v.Dirty, nil
}

// withConn runs fn on one of mg.db's connections, as pgx's own: the
// statements of queries.gen.go take a pgx connection, and golang-migrate a
// database/sql one. It is the same session (its lock_timeout set).
func (mg *Migrator) withConn(ctx context.Context, fn func(*pgx.Conn) error) error {
	c, err := mg.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Close()
	return c.Raw(func(driverConn any) error { return fn(driverConn.(*stdlib.Conn).Conn()) })
}

// Close releases the database connections.
func (mg *Migrator) Close() error {
	if mg.m != nil {
		srcErr, dbErr := mg.m.Close() // closes mg.db too
		return errors.Join(srcErr, dbErr)
	}
	return mg.db.Close()
}

// Up applies every pending migration to the database at databaseURL.
func Up(ctx context.Context, databaseURL string) error {
	mg, err := Open(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer mg.Close()
	return mg.Up()
}

// locked runs fn holding the gate, with golang-migrate set up.
func (mg *Migrator) locked(op string, fn func() error) error {
	return mg.lockedAfter(op, func() error { return nil }, fn)
}

// lockedAfter is locked with a check that runs under the gate before
// golang-migrate is set up (which creates its version table): a check
// that fails leaves the database as it was.
func (mg *Migrator) lockedAfter(op string, check, fn func() error) error {
	gate, err := mg.acquireGate()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer releaseGate(context.WithoutCancel(mg.ctx), gate)
	mg.gate = gate
	defer func() { mg.gate = nil }()
	if err := check(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if mg.m == nil {
		if err := mg.setUp(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// setUp prepares golang-migrate on mg.db. It takes golang-migrate's own lock
// (to create its version table), uncontended under the gate.
func (mg *Migrator) setUp() error {
	driver, err := pgxmigrate.WithInstance(mg.db, &pgxmigrate.Config{MigrationsTable: Table})
	if err != nil {
		return fmt.Errorf("prepare migrations: %w", err)
	}
	src, err := iofs.New(files, ".")
	if err != nil {
		return fmt.Errorf("read embedded migrations: %w", err)
	}
	mg.drv = &guardedDriver{Driver: driver, mg: mg}
	m, err := migrate.NewWithInstance("iofs", src, "postgres", mg.drv)
	if err != nil {
		return fmt.Errorf("prepare migrations: %w", err)
	}
	mg.m = m
	return nil
}

// cleanVersion is the applied version (0 when none), or an error naming
// the fix when the schema is dirty.
func (mg *Migrator) cleanVersion() (uint, error) {
	version, dirty, err := mg.Version()
	if err != nil {
		return 0, err
	}
	if dirty {
		return 0, dirtyError(version)
	}
	return version, nil
}

// explain turns golang-migrate's errors into one line an operator can act on.
func (mg *Migrator) explain(err error) error {
	var dirty migrate.ErrDirty
	if errors.As(err, &dirty) {
		return dirtyError(uint(max(dirty.Version, 0)))
	}
	return err
}

// dirtyError says how to repair a schema left dirty at version.
func dirtyError(version uint) error {
	prev := previousVersion(version)
	return fmt.Errorf("%w: the schema is dirty at version %d: migration %d was interrupted half-way; "+
		"run `engagementctl migrate force %d` then `engagementctl migrate up` to retry it "+
		"(or `engagementctl migrate force %d` if it had completed; see docs/migrations.md)",
		ErrSchemaOutdated, version, version, prev, version)
}

// Querier is a pgx pool, connection or transaction.
type Querier = postgres.Querier

// Check returns an error wrapping ErrSchemaOutdated, telling the operator
// what to run (`engagementctl migrate up`, or `migrate force` for a dirty
// schema), unless the database's schema is at least Latest and clean. A
// newer schema is accepted: migrations only add.
func Check(ctx context.Context, q Querier) error {
	hidden, err := hiddenTablesQuery.All(ctx, q, sqlfile.None{})
	if err != nil {
		return fmt.Errorf("check row level security: %w", err)
	}
	if len(hidden) > 0 {
		names := make([]string, len(hidden))
		for i, h := range hidden {
			names[i] = h.TableName
		}
		return hiddenError(names)
	}
	v, err := schemaVersionQuery.One(ctx, q, sqlfile.None{})
	version, dirty := v.Version, v.Dirty
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01", errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: no schema found (this binary needs version %d); run `engagementctl migrate up`", ErrSchemaOutdated, Latest)
	case err != nil:
		return fmt.Errorf("read schema version: %w", err)
	case dirty:
		return dirtyError(uint(max(version, 0)))
	case uint(version) < Latest:
		return fmt.Errorf("%w: schema is at version %d, this binary needs %d; run `engagementctl migrate up`", ErrSchemaOutdated, version, Latest)
	}
	return nil
}

// hiddenError says which tables row level security hides, and the fix.
func hiddenError(tables []string) error {
	return fmt.Errorf("%w: %s: the role has no policy there, so it would read them as empty; "+
		"run deploy/sql/roles.sql (it gives the jobs' role its policies) or connect as the tables' owner (docs/deploy.md)",
		ErrHiddenByRLS, strings.Join(tables, ", "))
}

// versions are the embedded migrations' versions, ascending.
var versions = embeddedVersions()

// Versions returns the versions of the embedded migrations, ascending
// (numbers may be skipped: each is the prefix of a migration's files).
func Versions() []uint { return slices.Clone(versions) }

func embeddedVersions() []uint {
	entries, _ := fs.ReadDir(files, ".") // fixed at build time; cannot fail
	var vs []uint
	for _, e := range entries {
		m, err := source.DefaultParse(e.Name())
		if err != nil || slices.Contains(vs, m.Version) {
			continue
		}
		vs = append(vs, m.Version)
	}
	slices.Sort(vs)
	return vs
}

func latestVersion() uint {
	vs := embeddedVersions()
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)-1]
}

// previousVersion is the embedded version before v (0 when none).
func previousVersion(v uint) uint {
	var prev uint
	for _, x := range versions {
		if x < v {
			prev = x
		}
	}
	return prev
}
