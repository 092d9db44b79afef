package migrations

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// The gate is a session advisory lock per database and schema
// (queries/try_gate.sql, queries/release_gate.sql), taken and given back
// in the simple protocol.

// releaseGate gives the gate back, then closes its connection. Unlocking
// first makes the gate free when the migrator returns: a closed session's
// locks go only when its server process has exited, a moment later, and
// the next migrator would find it held and say it waits. Ending the
// session releases the gate anyway, should unlocking fail.
func releaseGate(ctx context.Context, conn *pgx.Conn) {
	_, _ = releaseGateQuery.WithMode(pgx.QueryExecModeSimpleProtocol).Exec(ctx, conn, sqlfile.None{})
	conn.Close(ctx)
}

// acquireGate opens a connection of its own and takes the gate on it,
// polling between statements while another migrator holds it, up to
// Config.WaitTimeout. Closing the connection releases the gate.
//
// Why poll: CREATE INDEX CONCURRENTLY waits for every transaction whose
// snapshot is older than its own, and a session blocked in
// pg_advisory_lock is inside such a statement. The gate's holder building
// an index would wait for the waiter, which waits for the holder: the
// deadlock detector then kills one of them. Between two polls a waiter is
// in no transaction, so a CONCURRENTLY build never waits for it longer
// than one pg_try_advisory_lock takes.
func (mg *Migrator) acquireGate() (*pgx.Conn, error) {
	ctx := mg.ctx
	conn, err := pgx.ConnectConfig(ctx, mg.connCfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := mg.setLockTimeout(ctx, conn); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	deadline := time.Now().Add(mg.cfg.WaitTimeout)
	for waited := false; ; waited = true {
		gate, err := tryGateQuery.WithMode(pgx.QueryExecModeSimpleProtocol).One(ctx, conn, sqlfile.None{})
		if err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("take the migration lock: %w", err)
		}
		if gate.Taken {
			return conn, nil
		}
		if !waited {
			mg.cfg.Waiting()
		}
		if time.Now().After(deadline) {
			conn.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("another engagementctl migrate has held the migration lock for over %s; "+
				"find it in pg_stat_activity, or wait longer", mg.cfg.WaitTimeout)
		}
		if err := sleep(ctx, pollInterval); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("wait for another engagementctl migrate: %w", err)
		}
	}
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
