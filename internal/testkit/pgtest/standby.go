package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
)

// Standby is a hot standby of a test's own: a streaming replica of the
// server a database URL names (the throwaway cluster, or a Cluster),
// copied with pg_basebackup -R and started from the same binaries on a
// free port in a temporary directory, as a read replica (Supabase's, a
// managed database's) is. It answers read-only queries on the primary's
// databases as of the WAL it has replayed; it is stopped and removed when
// the test ends. The primary must accept replication connections from
// 127.0.0.1, as the kit's clusters do (initdb's default pg_hba.conf): give
// it a Cluster's URL (NewCluster). Not the shared server's: it holds every
// test's databases, so its copy is large, and a server DATABASE_URL names
// may refuse replication.
type Standby struct {
	// URL is the primary's database URL given to NewStandby, on the
	// standby: the same database, role and parameters.
	URL string
	// primary is that URL on the primary.
	primary string
	log     string
}

// NewStandby copies the server dbURL is on with pg_basebackup -R (the
// whole cluster, every database, streaming the WAL of the copy) and starts
// the copy as a hot standby that keeps streaming from the primary; it
// returns once the standby answers queries and has replayed a transaction
// committed on the primary after the copy. Any failure is fatal.
func NewStandby(t testing.TB, dbURL string) *Standby {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bins, err := findPostgres()
	if err != nil {
		t.Fatal(err)
	}
	owner, err := clusterOwner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The folder is named as NewCluster's: StopLeftovers stops a standby
	// whose test process ended without its cleanup.
	base, err := os.MkdirTemp(scratchRoot(), "pgtest-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil { // as root the server runs as postgres
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "data")
	t.Cleanup(func() {
		if _, err := stopThrowaway(context.Background(), dir); err != nil {
			t.Errorf("stop the test's standby: %v", err)
		}
		os.RemoveAll(base)
	})
	if owner != nil {
		if err := owner.chown(base); err != nil {
			t.Fatal(err)
		}
	}
	basebackup, err := pgBasebackup(bins)
	if err != nil {
		t.Fatal(err)
	}
	// -R writes standby.signal and the primary_conninfo to stream from;
	// -X stream copies the WAL written during the copy; a fast checkpoint
	// starts the copy at once.
	if _, err := runPG(ctx, owner, basebackup, "--dbname", dbURL, "--pgdata", dir, "--write-recovery-conf",
		"--wal-method", "stream", "--checkpoint", "fast", "--no-sync"); err != nil {
		t.Fatalf("pg_basebackup of %s: %v", redact(dbURL), err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	// The copy holds the primary's settings file, its port and socket
	// directory: the standby gets its own.
	if err := writeConf(dir, port, owner, true); err != nil {
		t.Fatal(err)
	}
	logPath := base + "/standby.log"
	if owner != nil {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := owner.chown(logPath); err != nil {
			t.Fatal(err)
		}
	}
	// -w: pg_ctl returns once the standby is consistent and accepts
	// read-only connections.
	if _, err := runPG(ctx, owner, bins.pgCtl, "-D", dir, "-l", logPath, "-w", "-t", "120", "-o", "-p "+strconv.Itoa(port), "start"); err != nil {
		t.Fatalf("start the standby: %v\nlast lines of %s:\n%s", err, logPath, localsvc.Tail(logPath, 20))
	}
	// What the cleanup's stop may stop: this postmaster (stopThrowaway).
	if err := localsvc.RecordProcess(startedFile(dir), postmasterPid(dir)); err != nil {
		t.Fatalf("record the standby started in %s: %v", dir, err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "127.0.0.1:" + strconv.Itoa(port)
	s := &Standby{URL: u.String(), primary: dbURL, log: logPath}
	recovery, err := oneOn(ctx, s.URL, kitInRecoveryQuery, sqlfile.None{})
	if err != nil || !recovery.InRecovery {
		t.Fatalf("the standby on port %d is not in recovery (%v): last lines of %s:\n%s", port, err, logPath, localsvc.Tail(logPath, 20))
	}
	// A transaction committed on the primary and replayed here: the
	// standby is caught up, and has a last replayed transaction to measure
	// its lag by (pg_last_xact_replay_timestamp is NULL until then).
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.CatchUp(t)
	return s
}

// Pause pauses the standby's replay (pg_wal_replay_pause): it keeps
// receiving the primary's WAL, but what commits there from now on is not
// visible on the standby until Resume. It returns once replay has stopped.
func (s *Standby) Pause(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := kitReplayPauseQuery.Exec(ctx, conn, sqlfile.None{}); err != nil {
		t.Fatal(err)
	}
	// A pause is requested, then takes effect at the next record: wait
	// for it, so nothing committed after Pause returns is replayed.
	for {
		pause, err := kitReplayPauseStateQuery.One(ctx, conn, sqlfile.None{})
		if err != nil {
			t.Fatal(err)
		}
		if pause.State != nil && *pause.State == "paused" {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the standby's replay did not pause: %v", pause.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Resume resumes the standby's replay (pg_wal_replay_resume) and waits
// until it has replayed everything the primary had written when Resume
// was called (CatchUp).
func (s *Standby) Resume(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := kitReplayResumeQuery.Exec(ctx, conn, sqlfile.None{}); err != nil {
		t.Fatal(err)
	}
	s.CatchUp(t)
}

// CatchUp waits until the standby has replayed the primary's WAL up to
// where it was when CatchUp was called: what had committed on the primary
// is then visible on the standby.
func (s *Standby) CatchUp(t testing.TB) {
	t.Helper()
	s.waitFor(t, false, "replayed")
}

// WaitReceived waits until the standby has received (not necessarily
// replayed) the primary's WAL up to where it was when WaitReceived was
// called: with replay paused, the standby then knows it is behind.
func (s *Standby) WaitReceived(t testing.TB) {
	t.Helper()
	s.waitFor(t, true, "received")
}

// waitFor waits until the standby's position (pg_last_wal_receive_lsn
// when received, else pg_last_wal_replay_lsn) reaches the primary's current WAL position. The
// primary is asked to flush first: the throwaway cluster commits
// asynchronously, and only flushed WAL is streamed.
func (s *Standby) waitFor(t testing.TB, received bool, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary, err := oneOn(ctx, s.primary, kitWalInsertLsnQuery, sqlfile.None{})
	if err != nil || primary.Lsn == nil {
		t.Fatalf("the primary's WAL position: %v", err)
	}
	lsn := *primary.Lsn
	if err := s.flush(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(time.Minute)
	for {
		standby, err := kitStandbyReachedQuery.One(ctx, conn, kitStandbyReachedArgs{Received: received, Lsn: lsn})
		if err != nil {
			t.Fatal(err)
		}
		if standby.Reached {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby has not %s the primary's WAL up to %s in a minute\nlast lines of %s:\n%s", what, lsn, s.log, localsvc.Tail(s.log, 20))
		}
		time.Sleep(10 * time.Millisecond) // polling the standby, not timing the test
	}
}

// flush makes the primary flush its WAL: a transaction that writes WAL and
// commits with synchronous_commit on waits for the flush of everything
// before it.
func (s *Standby) flush(ctx context.Context) error {
	conn, err := connect(ctx, s.primary)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // committed below
	// synchronous_commit on for the transaction; txid_current assigns it a
	// transaction id: its commit is a WAL record.
	if _, err := kitFlushQuery.Exec(ctx, tx, sqlfile.None{}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// pgBasebackup finds pg_basebackup beside the pg_ctl in use (a symlink
// followed), of the same version as the server it starts, else in PATH.
func pgBasebackup(bins pgBinaries) (string, error) { return bins.sibling("pg_basebackup") }

// oneOn runs statement q on the server dbURL names, on a connection of
// its own, and returns its first row.
func oneOn[P sqlfile.Params, R any, PR sqlfile.Row[R]](ctx context.Context, dbURL string, q sqlfile.Statement[P, R, PR], p P) (R, error) {
	conn, err := connect(ctx, dbURL)
	if err != nil {
		var zero R
		return zero, err
	}
	defer conn.Close(context.Background())
	r, err := q.One(ctx, conn, p)
	if err != nil {
		return r, fmt.Errorf("queries/%s.sql on %s: %w", q.Name, redact(dbURL), err)
	}
	return r, nil
}
