package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrTransactionPooler is returned by RequireSession when the URL leads to a
// transaction pooler (PgBouncer or Supavisor in transaction mode), where a
// client's statements may each run on a different server connection.
var ErrTransactionPooler = errors.New("the database URL leads to a transaction pooler (PgBouncer or Supavisor in transaction mode), " +
	"where a session does not last across statements")

const probeSetting = "engagement.session_probe"

// RequireSession checks that databaseURL gives a real session: what one
// statement leaves on the session (a setting, an advisory lock) is there for
// the next. Schema migrations need that; the jobs do not.
//
// The probe: connection A sets a session-level custom setting to a random
// value; connection B then opens a transaction, which holds a server
// connection (a pooler in LIFO order, PgBouncer's default, hands B the one A
// just released); A reads the setting back. Directly, or through a pooler in
// session mode, A is still its own session and reads its value; through a
// transaction pooler it runs on another server connection and does not. B
// clears the setting in its transaction, so the probe leaves nothing behind
// on a pooled server connection. It returns ErrTransactionPooler, a
// connection error, or nil.
func RequireSession(ctx context.Context, databaseURL string) error {
	config, err := parseConfig(databaseURL, "engagementctl", ConnectTimeout(ctx))
	if err != nil {
		return err
	}
	cc := config.ConnConfig.Copy()
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	connect := func() (*pgx.Conn, error) {
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			return nil, Redact(fmt.Errorf("connect to database: %w", err), databaseURL)
		}
		return conn, nil
	}
	a, err := connect()
	if err != nil {
		return err
	}
	defer a.Close(context.WithoutCancel(ctx))
	b, err := connect()
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))

	token := make([]byte, 8)
	rand.Read(token)
	want := hex.EncodeToString(token)
	if _, err := a.Exec(ctx, `SELECT set_config($1, $2, false)`, probeSetting, want); err != nil {
		return fmt.Errorf("probe the session: %w", err)
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("probe the session: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT set_config($1, '', false)`, probeSetting); err != nil {
		return fmt.Errorf("probe the session: %w", err)
	}
	rows, err := a.Query(ctx, `SELECT coalesce(current_setting($1, true), '') AS setting`, probeSetting)
	if err != nil {
		return fmt.Errorf("probe the session: %w", err)
	}
	got, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[struct{ Setting string }])
	if err != nil {
		return fmt.Errorf("probe the session: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("probe the session: %w", err)
	}
	if got.Setting != want {
		return ErrTransactionPooler
	}
	// Directly, the setting dies with A's session; clear it anyway.
	_, _ = a.Exec(ctx, `SELECT set_config($1, '', false)`, probeSetting)
	return nil
}
