package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
)

// ownerFile, in the folder of a test's own cluster (NewCluster), holds the
// pid of the test process it belongs to.
const ownerFile = "owner.pid"

// leftoverAge is how old the folder of a test's own cluster that names no
// owner must be before StopLeftovers takes it for a leftover.
const leftoverAge = time.Hour

// StopLeftovers stops what tests started for themselves and did not stop
// because their process ended first (killed, timed out): the clusters of
// NewCluster (pgtest-cluster-* in the scratch roots) whose test process is
// gone, and the PgBouncers of StartBouncer ($TMPDIR/pgtest-pgbouncer-*)
// whose test process is gone; it removes their folders. What running tests use is left alone.
// It returns a line for each thing it stopped.
func StopLeftovers(ctx context.Context) ([]string, error) {
	var done []string
	var errs []error
	var clusters []string
	for _, root := range scratchRoots() {
		found, _ := filepath.Glob(filepath.Join(root, "pgtest-cluster-*"))
		clusters = append(clusters, found...)
	}
	for _, base := range clusters {
		if owner, err := readPid(filepath.Join(base, ownerFile)); err == nil {
			if localsvc.Alive(owner) {
				continue
			}
		} else if fi, err := os.Stat(base); err != nil || time.Since(fi.ModTime()) < leftoverAge {
			continue // no owner named: only when old
		}
		if _, err := stopThrowaway(ctx, filepath.Join(base, "data")); err != nil {
			errs = append(errs, fmt.Errorf("stop the test cluster in %s: %w", base, err))
			continue
		}
		os.RemoveAll(base)
		done = append(done, "stopped the PostgreSQL cluster of an ended test in "+base)
	}
	bouncers, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgtest-pgbouncer-*"))
	for _, dir := range bouncers {
		pid, err := readPid(filepath.Join(dir, "pgbouncer.pid"))
		if err == nil && localsvc.Command(pid) == "pgbouncer" {
			// A bouncer runs as a child of its test process (a *.test
			// binary); once that is gone, it is reparented.
			if parent := localsvc.Parent(pid); strings.HasSuffix(localsvc.Executable(parent), ".test") {
				continue
			}
			if err := localsvc.Terminate(pid, syscall.SIGTERM, 10*time.Second); err != nil {
				errs = append(errs, fmt.Errorf("stop the PgBouncer in %s: %w", dir, err))
				continue
			}
			done = append(done, "stopped the PgBouncer of an ended test in "+dir)
		} else if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < leftoverAge {
			continue // not started yet, or just stopped
		}
		os.RemoveAll(dir)
	}
	return done, errors.Join(errs...)
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
