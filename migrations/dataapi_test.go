package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/migrations"
)

// TestDataAPIReachesNothing: issue 30 found every table the scheduler adds
// in public readable and writable by anyone holding a Supabase project's
// public anon key. As anon and as authenticated (what PostgREST switches
// to), on the bot's database and on a Supabase project without the bot's
// tables: no row of any table the scheduler created can be read, nothing
// can be inserted into the queue, and no function of the scheduler's can be
// executed.
func TestDataAPIReachesNothing(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]string{
		"bot's database":         botdb.NewDatabaseWithRows(t, time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)),
		"empty Supabase project": botdb.NewSupabaseDatabase(t),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if err := up(t, url); err != nil {
				t.Fatal(err)
			}
			conn := connect(t, url)
			created := fixture.MigrationsCreatedTables(t, conn)
			if len(created) < 9 {
				t.Fatalf("the scheduler's tables: %v, want at least 9", created)
			}
			functions := fixture.MigrationsFunctions(t, conn)
			if len(functions) == 0 {
				t.Fatalf("the scheduler's functions: %v", functions)
			}

			for _, role := range []string{"anon", "authenticated"} {
				asRole := func(run func(tx pgx.Tx) (int, error)) (int, error) {
					tx, err := conn.Begin(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback(ctx)
					fixture.SetLocal(t, tx, "role", role)
					return run(tx)
				}
				// Refused outright, even a table with no rows yet: a table
				// left readable would be readable once it fills.
				for _, table := range created {
					n, err := asRole(func(tx pgx.Tx) (int, error) { return fixture.MigrationsRowCount(ctx, tx, table) })
					var pgErr *pgconn.PgError
					if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
						t.Errorf("as %s: reading %s gave %d rows (%v), want permission denied (42501)", role, table, n, err)
					}
				}
				// The queue: nothing in, nothing out.
				if n, err := asRole(func(tx pgx.Tx) (int, error) {
					return fixture.MigrationsRowCount(ctx, tx, "engagement_message_queue")
				}); err == nil && n > 0 {
					t.Errorf("as %s: read %d queued messages, want none", role, n)
				}
				_, err := asRole(func(tx pgx.Tx) (int, error) { return fixture.MigrationsQueueGoodbye(ctx, tx, botdb.ActiveRecent) })
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
					t.Errorf("as %s: insert into the queue = %v, want refused (42501)", role, err)
				}
				for _, f := range functions {
					if fixture.MayExecute(t, conn, role, f) {
						t.Errorf("%s may execute %s, want not", role, f)
					}
				}
			}
			if definers := fixture.MigrationsOpenDefiners(t, conn, "anon", "authenticated"); definers != 0 {
				t.Errorf("SECURITY DEFINER functions anon or authenticated may execute: %d, want 0", definers)
			}
		})
	}
}

// TestCheckRefusesARoleThatRowLevelSecurityBlinds: a role with privileges
// but no policy would read the scheduler's tables (RLS on since migration
// 28) and the bot's as empty and quietly do nothing; Check refuses it,
// naming the tables and the fix, before any job starts.
func TestCheckRefusesARoleThatRowLevelSecurityBlinds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := botdb.NewDatabaseWithRows(t, time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	if err := up(t, url); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, url)
	role := fmt.Sprintf("engagement_blind_%d", time.Now().UnixNano())
	for _, stmt := range []string{
		`CREATE ROLE ` + role,
		`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ` + role,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		conn.Exec(context.Background(), `DROP OWNED BY `+role)
		conn.Exec(context.Background(), `DROP ROLE `+role)
	})
	if err := migrations.Check(ctx, conn); err != nil {
		t.Fatalf("Check as the owner = %v, want nil", err)
	}
	fixture.MigrationsSetSession(t, conn, "role", role)
	defer fixture.MigrationsSetSession(t, conn, "role", "none")
	err := migrations.Check(ctx, conn)
	if !errors.Is(err, migrations.ErrHiddenByRLS) {
		t.Fatalf("Check as a role without policies = %v, want ErrHiddenByRLS", err)
	}
	for _, want := range []string{"user_engagement_states", migrations.Table, "deploy/sql/roles.sql"} {
		if !errors.Is(err, migrations.ErrHiddenByRLS) || !strings.Contains(err.Error(), want) {
			t.Errorf("Check's error %q does not name %q", err, want)
		}
	}
}
