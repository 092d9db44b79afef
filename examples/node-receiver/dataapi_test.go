package receiver_test

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
)

// TestTheDeliveriesTableIsClosedToTheDataAPI (issue 42, item 6): on
// Supabase, public's default privileges grant every new table to the Data
// API roles, and the receiver created bot_webhook_deliveries there without
// row level security: anon could read and write the bot's claims. Made
// by the package's own ensureDeliveriesTable on a database with Supabase's
// roles and grants, the table now has row level security on and nothing
// granted to anon or authenticated; the bot's own role still uses it.
func TestTheDeliveriesTableIsClosedToTheDataAPI(t *testing.T) {
	t.Parallel()
	nodeReady(t)
	url := botdb.NewSupabaseDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range 2 { // a second start changes nothing and does not fail
		cmd := exec.CommandContext(ctx, "node", "-e", `
			const { Pool } = require('pg');
			const { ensureDeliveriesTable } = require('./receiver.js');
			const pool = new Pool({ connectionString: process.env.DATABASE_URL });
			ensureDeliveriesTable(pool).then(() => pool.end(), (err) => { console.error(err.message); process.exit(1); });`)
		cmd.Env = append(cmd.Environ(), "DATABASE_URL="+url)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ensureDeliveriesTable: %v\n%s", err, out)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if !fixture.RowSecurity(t, conn, "bot_webhook_deliveries") {
		t.Error("bot_webhook_deliveries has row level security off")
	}
	if err := fixture.WebhookDelivery(ctx, conn, "k:1"); err != nil {
		t.Fatalf("the owner (the bot's role) cannot use the table: %v", err)
	}
	for _, role := range []string{"anon", "authenticated"} {
		for _, stmt := range []string{
			`SELECT count(*) FROM bot_webhook_deliveries`,
			`INSERT INTO bot_webhook_deliveries (idempotency_key, status) VALUES ('k:2', 'sent')`,
			`DELETE FROM bot_webhook_deliveries`,
		} {
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+role); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, stmt)
				return err
			})
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
				t.Errorf("as %s, %s: %v; want permission denied (42501)", role, stmt, err)
			}
		}
	}
}
