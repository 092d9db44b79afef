package console

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// replicaStatus is the state of the read replica a snapshot was read from,
// at the moment it was read.
type replicaStatus struct {
	// Standby is false when the replica's URL names a server that is not
	// in recovery (the primary itself, say): what it answers is current.
	Standby bool
	// CaughtUp is true when the standby has replayed all the WAL it has
	// received: it is as current as streaming allows.
	CaughtUp bool
	// Lag is how long before the read the last transaction the standby
	// replayed committed on the primary; nil when it has replayed none
	// since it started.
	Lag *time.Duration
	// Paused is true when replay is paused (pg_wal_replay_pause).
	Paused bool
}

// readReplicaStatus reads the replica's state in tx, a transaction on it.
func readReplicaStatus(ctx context.Context, tx pgx.Tx) (*replicaStatus, error) {
	row, err := replicaStatusQuery.One(ctx, tx, sqlfile.None{})
	if err != nil {
		return nil, fmt.Errorf("read the replica's state: %w", err)
	}
	st := replicaStatus{Standby: row.Standby, CaughtUp: row.CaughtUp, Paused: row.Paused}
	if row.LagSeconds != nil {
		d := time.Duration(*row.LagSeconds * float64(time.Second))
		st.Lag = &d
	}
	return &st, nil
}

// String says in a few words how far behind the replica is, for the
// footer: "replica: up to date", "replica: 4.2 s behind, replay paused".
func (st *replicaStatus) String() string {
	switch {
	case st == nil:
		return ""
	case !st.Standby:
		return "replica: the --replica-url server is not a standby (it is not in recovery), so it is never behind"
	case st.CaughtUp && !st.Paused:
		return "replica: up to date"
	case st.CaughtUp:
		return "replica: up to date, replay paused"
	}
	behind := "replica: behind (it has replayed nothing since it started)"
	if st.Lag != nil {
		behind = "replica: " + formatSeconds(max(0, st.Lag.Seconds())) + " behind"
	}
	if st.Paused {
		behind += ", replay paused"
	}
	return behind
}

// lagHeader is the X-Replica-Lag header's value: the lag in seconds, 0
// when up to date or not a standby, "unknown" when there is none to tell.
func (st *replicaStatus) lagHeader() string {
	switch {
	case !st.Standby || st.CaughtUp:
		return "0"
	case st.Lag == nil:
		return "unknown"
	}
	return fmt.Sprintf("%.3f", max(0, st.Lag.Seconds()))
}
