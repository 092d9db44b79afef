// Package migrations holds the engagement scheduler's database schema as
// golang-migrate SQL files embedded in the binary, and applies them.
//
// Files are named NNNNNN_name.up.sql / NNNNNN_name.down.sql. A migration that
// needs CREATE INDEX CONCURRENTLY must live in a file of its own, because each
// file runs as one implicit transaction.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

//go:embed *.sql
var files embed.FS

// Table is the table golang-migrate records the schema version in. It is not
// the default schema_migrations, so the scheduler can share a database with
// the bot's own migrations.
const Table = "engagement_schema_migrations"

// Latest is the highest schema version embedded in this binary.
var Latest = latestVersion()

// ErrSchemaOutdated reports a database whose schema is missing, dirty or older
// than this binary needs.
var ErrSchemaOutdated = errors.New("database schema is not up to date")

// Migrator applies the embedded migrations to one database.
type Migrator struct {
	db *sql.DB
	m  *migrate.Migrate
}

// Open connects to the database and prepares the embedded migrations.
// Unless the URL sets connect_timeout, connecting gives up after
// postgres.DefaultConnectTimeout, as every other connection does.
func Open(ctx context.Context, databaseURL string) (*Migrator, error) {
	config, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	if config.ConnectTimeout == 0 {
		// Without it, a server that accepts and never answers hangs
		// engagementctl migrate forever.
		config.ConnectTimeout = postgres.DefaultConnectTimeout
	}
	db := stdlib.OpenDB(*config)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{MigrationsTable: Table})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare migrations: %w", err)
	}
	source, err := iofs.New(files, ".")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", source, "postgres", driver)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare migrations: %w", err)
	}
	return &Migrator{db: db, m: m}, nil
}

// Up applies every pending migration. An up-to-date database is not an error.
func (mg *Migrator) Up() error {
	if err := mg.m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// Down rolls back the n most recent migrations.
func (mg *Migrator) Down(n int) error {
	if n <= 0 {
		return fmt.Errorf("migrate down: steps must be positive, got %d", n)
	}
	if _, _, err := mg.m.Version(); errors.Is(err, migrate.ErrNilVersion) {
		return nil // nothing applied, nothing to roll back
	}
	if err := mg.m.Steps(-n); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		var short migrate.ErrShortLimit
		if errors.As(err, &short) {
			return nil // fewer than n applied: everything is rolled back, which is what was asked
		}
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// DownAll rolls back every migration.
func (mg *Migrator) DownAll() error {
	if err := mg.m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// Version reports the applied schema version (0 when none) and whether the
// last migration failed half-way (dirty).
func (mg *Migrator) Version() (version uint, dirty bool, err error) {
	version, dirty, err = mg.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	return version, dirty, err
}

// Close releases the database connection.
func (mg *Migrator) Close() error {
	srcErr, dbErr := mg.m.Close()
	return errors.Join(srcErr, dbErr, mg.db.Close())
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

// Querier is the part of a pgx pool, connection or transaction that Check uses.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Check returns an error wrapping ErrSchemaOutdated, telling the operator to
// run `engagementctl migrate up`, unless the database's schema is at least
// Latest and clean. A newer schema is accepted: migrations only add.
func Check(ctx context.Context, q Querier) error {
	var (
		version int64
		dirty   bool
	)
	err := q.QueryRow(ctx, `SELECT version, dirty FROM `+Table+` LIMIT 1`).Scan(&version, &dirty)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01", errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: no schema found (this binary needs version %d); run `engagementctl migrate up`", ErrSchemaOutdated, Latest)
	case err != nil:
		return fmt.Errorf("read schema version: %w", err)
	case dirty:
		return fmt.Errorf("%w: migration %d failed half-way (dirty); fix it, then run `engagementctl migrate up`", ErrSchemaOutdated, version)
	case uint(version) < Latest:
		return fmt.Errorf("%w: schema is at version %d, this binary needs %d; run `engagementctl migrate up`", ErrSchemaOutdated, version, Latest)
	}
	return nil
}

func latestVersion() uint {
	entries, _ := fs.ReadDir(files, ".") // fixed at build time; cannot fail
	var latest uint
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			continue
		}
		if v, err := strconv.ParseUint(prefix, 10, 64); err == nil && uint(v) > latest {
			latest = uint(v)
		}
	}
	return latest
}
