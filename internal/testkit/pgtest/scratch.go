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
// memory file system (/dev/shm) when it has room (memory), else the
// temporary directory. The suite creates and drops some 400 databases of
// 466 files each; on ext4, creating a file right after others were deleted
// searches past each recently freed inode, a tenth of the suite's CPU on
// this kind of machine (docs/development.md, "The eighth pass").
func scratchRoot() string {
	if root := memory(minMemoryRoot); root != "" {
		return root
	}
	return os.TempDir()
}

// memory returns the memory file system the kit may use with at least
// free bytes available: none when TMPDIR is set, since a folder chosen for
// temporary files is honoured (and tests isolate themselves with it), else
// memoryRoot's.
func memory(free uint64) string {
	if os.Getenv("TMPDIR") != "" {
		return ""
	}
	return memoryRoot(free)
}

// defaultDir is the throwaway cluster's data directory when PGTEST_DIR is
// unset (clusterDir).
func defaultDir() string {
	return clusterDir(os.TempDir(), memory(0), memory(minMemoryRoot))
}

// clusterDir picks the throwaway cluster's folder in tmp, the temporary
// directory, or mem, the memory file system ("" if none), where roomy is
// mem when it has the room for a new cluster: in memory when it is
// already there or there is room, else in tmp. A cluster an earlier
// version started in tmp is used while it runs, and one in memory stays
// there though the room shrank, so that every process of a run picks the
// same cluster; `make services-stop` stops it, and the next start moves.
func clusterDir(tmp, mem, roomy string) string {
	disk := filepath.Join(tmp, clusterName)
	if localsvc.Recorded(startedFile(disk), "postgres") != 0 {
		return disk
	}
	if mem != "" {
		if _, err := os.Stat(filepath.Join(mem, clusterName, markerConf)); err == nil {
			return filepath.Join(mem, clusterName)
		}
	}
	if roomy != "" {
		return filepath.Join(roomy, clusterName)
	}
	return disk
}

// scratchRoots are the folders where tests' own clusters may be left over.
func scratchRoots() []string {
	roots := []string{os.TempDir()}
	if root := memory(0); root != "" && root != os.TempDir() {
		roots = append(roots, root)
	}
	return roots
}
