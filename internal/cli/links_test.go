package cli_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
		"internal/cli/jobcmd", "internal/cli/consolecmd", "console", "internal/analytics",
	},
	"engagement-console": {
		"internal/cli/jobcmd", "internal/cli/ctl", "status", "internal/seed", "internal/smoke", "internal/analytics",
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
	const module = "github.com/engagement-scheduler/engagement/"
	for _, bin := range binaries {
		forbidden, ok := notLinked[bin]
		if !ok {
			t.Errorf("cmd/%s has no row in notLinked: say which packages it must not link", bin)
			continue
		}
		cmd := exec.Command("go", "list", "-deps", "./cmd/"+bin)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				err = fmt.Errorf("%w\n%s", err, exit.Stderr)
			}
			t.Fatalf("go list -deps ./cmd/%s: %v", bin, err)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, module+"internal/cli") {
			t.Fatalf("go list -deps ./cmd/%s does not list internal/cli: %q", bin, deps)
		}
		for _, pkg := range forbidden {
			if slices.Contains(deps, module+pkg) {
				t.Errorf("%s links %s, which it never runs", bin, pkg)
			}
		}
	}
}
