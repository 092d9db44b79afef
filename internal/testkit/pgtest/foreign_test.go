package pgtest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 55, finding 9: the kit took whatever answered on its throwaway
// port for its own cluster, and a second checkout's CI on the same machine
// ran its tests on another checkout's cluster. Here a cluster with another
// data directory (another checkout's, as far as this one can tell) runs on
// the port; the kit, asked for the cluster in its own directory on that
// port, must refuse it, saying why and what to do, and start nothing and
// stop nothing. The cluster in its own directory is still its own.
func TestTheKitUsesNoForeignClusterOnItsPort(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("", "pgtest-foreign-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil { // as root, the cluster runs as postgres and must reach it
		t.Fatal(err)
	}
	foreign, own := filepath.Join(base, "other-checkout"), filepath.Join(base, "this-checkout")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		for _, dir := range []string{own, foreign} {
			if _, err := stopThrowaway(context.Background(), dir); err != nil {
				t.Errorf("stop the cluster in %s: %v", dir, err)
			}
		}
		os.RemoveAll(base)
	})
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	if _, started, err := startThrowaway(ctx, foreign, port, false); err != nil || !started {
		t.Fatalf("start the other checkout's cluster: started %v, %v", started, err)
	}

	dbURL, started, err := startThrowaway(ctx, own, port, false)
	if err == nil {
		t.Fatalf("the kit took the cluster of %s, on its port %d, for its own in %s (%s, started %v)", foreign, port, own, dbURL, started)
	}
	t.Logf("refused: %v", err)
	for _, want := range []string{strconv.Itoa(port), own, foreign, "PGTEST_PORT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if started {
		t.Error("started = true for a refusal")
	}
	if _, err := os.Stat(filepath.Join(own, "PG_VERSION")); !os.IsNotExist(err) {
		t.Errorf("the kit made a cluster in %s although the port is taken (%v)", own, err)
	}
	if err := ping(ctx, throwawayURL(port)); err != nil {
		t.Errorf("the other checkout's cluster no longer answers: %v", err)
	}

	// Its own, running, it takes as before.
	if u, started, err := startThrowaway(ctx, foreign, port, false); err != nil || started || u != throwawayURL(port) {
		t.Errorf("the cluster in its own directory: %s, started %v, %v; want it taken as it runs", u, started, err)
	}
}

// A test's own cluster starts on a port the kernel called free a moment
// before; on a busy machine another program, or the local end of one of
// the suite's outgoing connections, can take it in between (as it took
// the reference receiver's, 2026-11-30). Here the first port offered is
// held by a listener: the cluster starts on the next one.
func TestAClusterWhosePortIsTakenStartsOnAnother(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	offered := 0
	c := newCluster(t, func() (int, error) {
		if offered++; offered == 1 {
			return taken, nil
		}
		return freePort()
	})
	if offered != 2 || strings.Contains(c.URL, ":"+strconv.Itoa(taken)+"/") {
		t.Fatalf("%d ports offered, the cluster at %s; want it on the second, not on %d", offered, redact(c.URL), taken)
	}
	if err := ping(t.Context(), c.URL); err != nil {
		t.Fatalf("the cluster does not answer: %v", err)
	}
}
