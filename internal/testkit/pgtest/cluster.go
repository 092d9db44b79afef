package pgtest

import (
	"context"
	_ "embed" // the cluster's database statement
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
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

// NewCluster starts a cluster from a copy of a prepared one
// (clusterTemplate) whose database is migrated.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	return newCluster(t, freePort)
}

// newCluster is NewCluster on a port pick gives.
func newCluster(t testing.TB, pick func() (int, error)) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base, err := os.MkdirTemp(scratchRoot(), "pgtest-cluster-")
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
	tmpl, err := clusterTemplate(ctx)
	if err != nil {
		t.Fatalf("prepare the clusters' template: %v", err)
	}
	// cp -a keeps the files' owner and modes, which the server checks.
	if out, err := exec.CommandContext(ctx, "cp", "-a", tmpl, c.dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the clusters' template: %v: %s", err, out)
	}
	srv, err := startOnFreePort(ctx, c.dir, true, pick)
	if err != nil {
		t.Fatalf("start a PostgreSQL cluster of the test's own: %v", err)
	}
	if c.URL, err = WithDatabase(srv, "engagement"); err != nil {
		t.Fatal(err)
	}
	return c
}

// clusterTemplate returns the data directory NewCluster copies: a stopped
// cluster holding the database "engagement", migrated to the latest
// version. It is made once per machine, PostgreSQL version and migration
// set (pgtest-template-cluster-* in the scratch root), under a lock, in a side folder
// renamed when complete. A copy costs the server nothing and the machine
// 0.4 s; an initdb and every migration cost 1.3 s of CPU (issue 60).
func clusterTemplate(ctx context.Context) (string, error) {
	bins, err := findOrInstallPostgres(ctx)
	if err != nil {
		return "", err
	}
	prefix := filepath.Join(scratchRoot(), "pgtest-template-cluster-")
	base := prefix + bins.major + "-" + migrationsHash()
	data := filepath.Join(base, "data")
	unlock, err := localsvc.LockFile(ctx, base+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(data); err == nil {
		return data, nil
	}
	// Templates of other migration sets and versions a day old are of no
	// more use. (A younger one may be another checkout's, in use.)
	old, _ := filepath.Glob(prefix + "*")
	for _, dir := range old {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > 24*time.Hour {
			os.RemoveAll(dir)
		}
	}
	build := base + ".build"
	if err := os.RemoveAll(build); err != nil {
		return "", err
	}
	if err := os.Mkdir(build, 0o755); err != nil { // as root the server runs as postgres, which must reach it
		return "", err
	}
	if err := buildClusterTemplate(ctx, filepath.Join(build, "data")); err != nil {
		os.RemoveAll(build)
		return "", err
	}
	if err := os.Rename(build, base); err != nil {
		return "", err
	}
	return data, nil
}

// buildClusterTemplate initializes a cluster in dir, creates and migrates
// its database, and stops it cleanly.
func buildClusterTemplate(ctx context.Context, dir string) (err error) {
	srv, err := startOnFreePort(ctx, dir, true, freePort)
	if err != nil {
		return fmt.Errorf("start the clusters' template: %w", err)
	}
	defer func() {
		if _, stopErr := stopThrowaway(context.Background(), dir); err == nil && stopErr != nil {
			err = fmt.Errorf("stop the clusters' template: %w", stopErr)
		}
		os.Remove(startedFile(dir))
	}()
	conn, err := connect(ctx, srv)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, clusterDatabaseSQL); err != nil {
		return err
	}
	url, err := WithDatabase(srv, "engagement")
	if err != nil {
		return err
	}
	if err := migrations.Up(ctx, url); err != nil {
		return fmt.Errorf("migrate the clusters' template: %w", err)
	}
	return nil
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
