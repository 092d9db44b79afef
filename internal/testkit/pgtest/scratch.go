package pgtest

import (
	"os"
	"path/filepath"

	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
)

// clusterName is the throwaway cluster's folder in the scratch root.
const clusterName = "engagement-pgtest"

// minMemoryRoot is the room a memory file system must have for the kit's
// clusters to live there. They take about 150 MB at the suite's peak: the
// shared cluster with its copies of the template, and the tests' own.
const minMemoryRoot = 2 << 30

// scratchRoot is the folder the kit's clusters live in: the machine's
// memory file system (/dev/shm) when it has room (memoryRoot), else the
// temporary directory. The suite creates and drops some 400 databases of
// 466 files each; on ext4, creating a file right after others were deleted
// searches past each recently freed inode, a tenth of the suite's CPU on
// this kind of machine (docs/development.md, "The eighth pass").
func scratchRoot() string {
	if root := memoryRoot(minMemoryRoot); root != "" {
		return root
	}
	return os.TempDir()
}

// defaultDir is the throwaway cluster's data directory when PGTEST_DIR is
// unset: in the scratch root, or where it already is. A cluster in memory
// stays there though the room shrank, and one an earlier version started in
// $TMPDIR is used while it runs, so that every process of a run picks the
// same cluster; `make services-stop` stops it, and the next start moves.
func defaultDir() string {
	disk := filepath.Join(os.TempDir(), clusterName)
	if localsvc.Recorded(startedFile(disk), "postgres") != 0 {
		return disk
	}
	if root := memoryRoot(0); root != "" {
		if _, err := os.Stat(filepath.Join(root, clusterName, markerConf)); err == nil {
			return filepath.Join(root, clusterName)
		}
	}
	return filepath.Join(scratchRoot(), clusterName)
}

// scratchRoots are the folders where tests' own clusters may be left over.
func scratchRoots() []string {
	roots := []string{os.TempDir()}
	if root := memoryRoot(0); root != "" && root != os.TempDir() {
		roots = append(roots, root)
	}
	return roots
}
