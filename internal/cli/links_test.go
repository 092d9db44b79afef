package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// notLinked is, for each binary in cmd/, the module's packages it must not
// link: those of the commands it does not run. Every binary once linked
// every command (issue 42), and with them package console, whose
// initialization cost each run of every binary ~200 ms. A binary added to
// cmd/ needs its row.
var notLinked = map[string][]string{
	"queue-process": {
		"internal/cli/jobcmd", "internal/cli/ctl", "internal/cli/consolecmd",
		"console", "verify", "status", "repair", "retention", "internal/seed", "internal/smoke", "internal/analytics",
	},
	"engagement-daily": {
		"internal/cli/ctl", "internal/cli/consolecmd",
		"console", "verify", "status", "repair", "retention", "internal/seed", "internal/smoke",
	},
	"engagement-weekly": {
		"internal/cli/ctl", "internal/cli/consolecmd",
		"console", "verify", "status", "repair", "retention", "internal/seed", "internal/smoke",
	},
	"engagementctl": {
		"internal/cli/jobcmd", "internal/cli/queuecmd", "internal/cli/consolecmd", "console", "internal/analytics",
	},
	"engagement-console": {
		"internal/cli/jobcmd", "internal/cli/queuecmd", "internal/cli/ctl", "status", "internal/seed", "internal/smoke", "internal/analytics",
	},
}

// TestEachBinaryLinksOnlyWhatItRuns asks the go command what each binary
// links, as go build would link it.
func TestEachBinaryLinksOnlyWhatItRuns(t *testing.T) {
	t.Parallel()
	root, err := cmdtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var binaries []string
	for _, d := range dirs {
		if d.IsDir() {
			binaries = append(binaries, d.Name())
		}
	}
	if len(binaries) == 0 {
		t.Fatal("no binary in cmd/")
	}
	for _, bin := range binaries {
		forbidden, ok := notLinked[bin]
		if !ok {
			t.Errorf("cmd/%s has no row in notLinked: say which packages it must not link", bin)
			continue
		}
		deps := goList(t, "-deps", "./cmd/"+bin)
		if !slices.Contains(deps, module+"/internal/cli") {
			t.Fatalf("go list -deps ./cmd/%s does not list internal/cli: %q", bin, deps)
		}
		for _, pkg := range forbidden {
			if slices.Contains(deps, module+"/"+pkg) {
				t.Errorf("%s links %s, which it never runs", bin, pkg)
			}
		}
	}
}
