package pgtest

import (
	"context"
	_ "embed" // the cluster's database statement
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/migrations"
)

// clusterDatabaseSQL creates a test's own cluster's database: DDL, which
// takes no parameters, so a file of its own rather than a typed statement.
//
//go:embed sql/cluster_database.sql
var clusterDatabaseSQL string

// Cluster is a PostgreSQL server of one test's own, for the tests that stop
// or restart the server under a running job; every other test shares one
// server and gets a database on it (NewDatabase). It runs from the same
// binaries as the throwaway cluster (installing them if needed), on a free
// port, in a temporary directory, and is stopped and removed when the test
// ends.
type Cluster struct {
	// URL is the cluster's database "engagement", migrated to the latest
	// version.
	URL string
	dir string
}

// NewCluster initializes and starts a cluster and creates its migrated
// database.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base, err := os.MkdirTemp("", "pgtest-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	// As root the server runs as postgres, which must reach its directory.
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	// Who the cluster belongs to: StopLeftovers stops it should this
	// process end without its cleanup (killed, timed out).
	if err := os.WriteFile(filepath.Join(base, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{dir: filepath.Join(base, "data")}
	t.Cleanup(func() {
		if _, err := stopThrowaway(context.Background(), c.dir); err != nil {
			t.Errorf("stop the test's PostgreSQL cluster: %v", err)
		}
		os.RemoveAll(base)
	})
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	srv, _, err := startThrowaway(ctx, c.dir, port, true)
	if err != nil {
		t.Fatalf("start a PostgreSQL cluster of the test's own: %v", err)
	}
	conn, err := connect(ctx, srv)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, clusterDatabaseSQL); err != nil {
		t.Fatal(err)
	}
	if c.URL, err = WithDatabase(srv, "engagement"); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, c.URL); err != nil {
		t.Fatalf("migrate the test's cluster: %v", err)
	}
	return c
}

// Restart restarts the server the way an operator or a crash-free failover
// does (pg_ctl restart -m fast): every session is ended (SQLSTATE 57P01),
// and connections are refused until it is back. It returns once the server
// accepts connections again.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bins, err := findPostgres()
	if err != nil {
		t.Fatal(err)
	}
	owner, err := clusterOwner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// -l: the restarted server must not inherit this command's output
	// pipe, or running pg_ctl would wait for the server to exit.
	if _, err := runPG(ctx, owner, bins.pgCtl, "-D", c.dir, "-l", c.dir+".log", "-w", "-t", "60", "-m", "fast", "restart"); err != nil {
		t.Fatalf("restart the test's PostgreSQL cluster: %v", err)
	}
}

// freePort asks the kernel for a free TCP port on the loopback address.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
