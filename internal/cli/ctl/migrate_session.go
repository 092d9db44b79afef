package ctl

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// migrateDatabaseURL is the URL engagementctl migrate uses: --database-url
// when given on the command line, else --migrate-database-url
// (MIGRATE_DATABASE_URL) when set, else DATABASE_URL (current). The jobs may reach the database through a transaction pooler;
// migrations need a direct (or session-mode) connection, which operators
// give in MIGRATE_DATABASE_URL.
func migrateDatabaseURL(cmd *cobra.Command, current, migrateURL string) string {
	if f := cmd.Flag("database-url"); f != nil && f.Changed {
		return current
	}
	if migrateURL != "" {
		return migrateURL
	}
	return current
}

// requireMigrateSession fails with one line (exit 2: a configuration error,
// found before any change) when databaseURL leads to a transaction pooler:
// golang-migrate holds a session advisory lock across statements, which a
// transaction pooler cannot keep.
func requireMigrateSession(ctx context.Context, databaseURL string) error {
	err := postgres.RequireSession(ctx, databaseURL)
	if errors.Is(err, postgres.ErrTransactionPooler) {
		return cli.Usagef("%v; migrations hold a lock across statements and need a direct connection: "+
			"set MIGRATE_DATABASE_URL (or --database-url) to PostgreSQL itself or a session-mode pooler", err)
	}
	return err
}
