package cli_test

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// layers is the house, top down: a package may import its own layer and
// the layers below it, never one above. Every package of the module is in
// one layer (a new package needs its place here), except the test kit
// (internal/testkit/…, test support only, which may import anything and
// which nothing outside tests and the demo imports).
var layers = []struct {
	name     string
	packages []string // relative to the module; a trailing /... takes the subtree
}{
	{"commands: flags, wiring, exit codes, and the tools around them", []string{
		"cmd/...", "internal/cli/...", "internal/cliflag", "internal/docgen/...", "internal/demo",
	}},
	{"application: what the commands run", []string{
		"scheduler", "delivery", "verify", "status", "repair", "retention", "erase", "console", "funnel",
		"internal/metrics", "internal/analytics", "internal/seed", "internal/smoke",
	}},
	{"domain: the bot's API and the contracts the jobs share with it", []string{
		"sender", "sender/transport", "activity", "idempotency", "pricing",
	}},
	{"storage: the schema and the database's plumbing", []string{
		"migrations", "internal/postgres", "internal/sqlfile",
	}},
	{"rules and support: pure Go that imports nothing of the module's", []string{
		leaf, "statemachine", "internal/recovered", "internal/earlystop", "internal/earlystop/first", "internal/drift",
		"deploy", "examples/node-receiver", // tests only: the manifests, the npm package
	}},
}

// leaf is the root package, engagement: the types and values the
// application packages share (their runs' summaries, the defaults several
// judge by). It imports nothing of the module's, so that no application
// package imports another for one type or constant.
const leaf = "."

// notImported are imports the layers allow that the design rules out,
// each with why.
var notImported = []struct{ from, to, why string }{
	{"verify", "scheduler", "verify checks what the jobs did; the deadlines it needs are statemachine's (DeadlineArgs), not the job's"},
	{"verify", "delivery", "verify needs delivery's claim timeout only: engagement.DefaultClaimTimeout"},
	{"verify", "retention", "verify needs the cleanup's default only: engagement.DefaultRetention"},
	{"scheduler", "delivery", "a job holds its queue step's summary, engagement.DeliverySummary; the command layer runs the step"},
	{"internal/metrics", "scheduler", "metrics pushes a job's summary, engagement.JobSummary"},
	{"internal/metrics", "delivery", "metrics pushes a delivery's summary, engagement.DeliverySummary"},
}

// relative is path relative to the module ("." for its root), and whether
// it is the module's.
func relative(path string) (string, bool) {
	if path == module {
		return leaf, true
	}
	return strings.CutPrefix(path, module+"/")
}

const module = "github.com/engagement-scheduler/engagement"

// flagLibraries are the command line's libraries: only the command layer
// (layers[0]) imports them. The packages below it are libraries that take
// configuration structs and validate them; which flag fills which field,
// and from which environment variable, is the commands' business (issue
// 60: sender/transport declared its transports' flags).
var flagLibraries = []string{"github.com/spf13/pflag", "github.com/spf13/cobra"}

// layerOf is the index in layers of pkg (relative to the module), or -1.
func layerOf(pkg string) int {
	for i, l := range layers {
		for _, p := range l.packages {
			if p == pkg || (strings.HasSuffix(p, "/...") && (pkg == strings.TrimSuffix(p, "/...") || strings.HasPrefix(pkg, strings.TrimSuffix(p, "...")))) {
				return i
			}
		}
	}
	return -1
}

// goList runs go list at the module's root and returns its output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	root, err := cmdtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestTheHouseReadsTopDown asks the go command for every package's imports
// (not its tests': a test may run the whole house) and fails on an import
// that points up a layer, on a package with no layer, on a package below
// the command layer importing a flag library, on the root package (the
// leaf every application package may share) importing the module's, on
// an import notImported rules out, and on a production package importing
// the test kit.
func TestTheHouseReadsTopDown(t *testing.T) {
	t.Parallel()
	lines := goList(t, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	if len(lines) < 20 {
		t.Fatalf("go list found %d packages; the listing is broken", len(lines))
	}
	var edges int
	for _, line := range lines {
		fields := strings.Fields(line)
		pkg, ok := relative(fields[0])
		if !ok {
			t.Fatalf("package %s is outside the module", fields[0])
		}
		if pkg == "internal/testkit" || strings.HasPrefix(pkg, "internal/testkit/") {
			continue
		}
		from := layerOf(pkg)
		if from < 0 {
			t.Errorf("package %s has no layer: add it to layers in internal/cli/layers_test.go", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := relative(imp)
			if !ok {
				if from > 0 && slices.ContainsFunc(flagLibraries, func(lib string) bool { return imp == lib || strings.HasPrefix(imp, lib+"/") }) {
					t.Errorf("%s (%s) imports %s: flags belong to the command layer; take a configuration struct instead", pkg, layers[from].name, imp)
				}
				continue
			}
			edges++
			if pkg == leaf {
				t.Errorf("the root package imports %s: it holds the types the application packages share and imports nothing of the module's", dep)
			}
			if strings.HasPrefix(dep, "internal/testkit/") {
				if pkg != "internal/demo" {
					t.Errorf("%s imports the test kit (%s): it is test support only", pkg, dep)
				}
				continue
			}
			to := layerOf(dep)
			if to < 0 {
				continue // reported as its own package
			}
			if to < from {
				t.Errorf("%s (%s) imports %s (%s): an import pointing up", pkg, layers[from].name, dep, layers[to].name)
			}
			for _, n := range notImported {
				if pkg == n.from && dep == n.to {
					t.Errorf("%s imports %s: %s", pkg, dep, n.why)
				}
			}
		}
	}
	if edges == 0 {
		t.Fatal("no import of the module's packages found: the listing is broken")
	}
}

// TestVerifyDoesNotImportScheduler asks the go command what verify links,
// directly or not: not scheduler (issue 47), and what every other package
// notImported names links: not what it rules out (issue 60).
func TestVerifyDoesNotImportScheduler(t *testing.T) {
	t.Parallel()
	for _, n := range notImported {
		deps := goList(t, "-deps", "./"+n.from)
		if slices.Contains(deps, module+"/"+n.to) {
			t.Errorf("%s links %s: %s", n.from, n.to, n.why)
		}
	}
}
