package earlystop_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

func TestMain(m *testing.M) { cmdtest.Main(m) }

// TestEveryBinaryCatchesStopsBeforeItsPackagesStart: in each binary,
// earlystop is initialized before every package of the module, pgx and
// Prometheus (the runtime's own inittrace says in which order), so that
// a SIGTERM during their start-up is caught rather than fatal; and
// earlystop/first, which has the runtime queue the signals, before os.
func TestEveryBinaryCatchesStopsBeforeItsPackagesStart(t *testing.T) {
	t.Parallel()
	mains, err := filepath.Glob("../../cmd/*")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no cmd/* (%v)", err)
	}
	const self = "github.com/engagement-scheduler/engagement/internal/earlystop"
	initLine := regexp.MustCompile(`(?m)^init (\S+) @`)
	for _, dir := range mains {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			bin := cmdtest.Build(t, "./cmd/"+name)
			cmd := exec.Command(bin, "--help")
			cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s --help: %v\n%s", name, err, out)
			}
			var order []string
			for _, m := range initLine.FindAllStringSubmatch(string(out), -1) {
				order = append(order, m[1])
			}
			at := slices.Index(order, self)
			if at < 0 {
				t.Fatalf("%s does not initialize earlystop; its packages: %v", name, order)
			}
			// The runtime queues the signals from package first's init,
			// before os (cmdtest.FirstInstant, from which the stop tests
			// count) and everything that imports it: only packages that
			// import nothing and sort before it come first.
			first := slices.Index(order, self+"/first")
			if osAt := slices.Index(order, "os"); first < 0 || osAt < 0 || first > osAt {
				t.Errorf("%s initializes earlystop/first at %d, os at %d; want first before os: %v", name, first, osAt, order)
			}
			if !strings.HasPrefix(cmdtest.FirstInstant, "init os @") {
				t.Errorf("cmdtest.FirstInstant is %q; this test checks package os", cmdtest.FirstInstant)
			}
			for _, pkg := range order[:at] {
				if pkg == self+"/first" {
					continue // earlystop's own: it must come first
				}
				if strings.HasPrefix(pkg, "github.com/engagement-scheduler/") || strings.HasPrefix(pkg, "github.com/prometheus/") ||
					pkg == "github.com/jackc/pgx/v5" || pkg == "github.com/jackc/pgx/v5/pgxpool" {
					t.Errorf("%s initializes %s before earlystop: a SIGTERM during its start-up would be fatal", name, pkg)
				}
			}
		})
	}
}
