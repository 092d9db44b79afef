// Command prepare is `make test`'s first, visible step: it says what the
// tests need from the machine, installs what is missing from Debian's
// packages (as root or with password-less sudo, --no-install-recommends,
// their system services left stopped and disabled), and starts the
// throwaway PostgreSQL and Redis the tests use, unless DATABASE_URL and
// REDIS_URL, or servers on their usual ports, are there to use instead
// (PGTEST_PROBE_URL=none and REDISTEST_PROBE_ADDR=none skip the probes).
// `go test` then finds everything ready and says nothing for minutes only
// while it tests. A failure is one line on stderr and exit 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/redistest"
)

// need is a Debian package the tests use, found by one of its binaries.
type need struct {
	pkg    string
	usedBy string // which tests need it
	bins   []string
	// skip, when set, says why the package is not needed here ("" when it is).
	skip func() string
}

var needs = []need{
	{pkg: "postgresql", usedBy: "every test: a throwaway cluster", bins: []string{"pg_ctl", "/usr/lib/postgresql/*/bin/pg_ctl"},
		skip: func() string { return envSet("TEST_DATABASE_URL", "DATABASE_URL") }},
	{pkg: "pgbouncer", usedBy: "the transaction-pooler tests", bins: []string{"pgbouncer", "/usr/sbin/pgbouncer"}},
	{pkg: "redis-server", usedBy: "the Redis dedupe store's tests", bins: []string{"redis-server"},
		skip: func() string { return envSet("TEST_REDIS_URL", "REDIS_URL") }},
	{pkg: "prometheus", usedBy: "promtool, for the alert rules' tests", bins: []string{"promtool"}},
	{pkg: "prometheus-pushgateway", usedBy: "the metrics tests", bins: []string{"prometheus-pushgateway", "/usr/bin/prometheus-pushgateway"}},
	{pkg: "nodejs", usedBy: "the reference Node.js receiver's tests", bins: []string{"node"}},
	{pkg: "npm", usedBy: "the bot package's dependencies (npm ci)", bins: []string{"npm"}},
	{pkg: "chromium", usedBy: "the web console's browser tests (browsertest)", bins: []string{"chromium", "/usr/bin/chromium"}},
}

func envSet(names ...string) string {
	for _, n := range names {
		if os.Getenv(n) != "" {
			return n + " is set"
		}
	}
	return ""
}

// find returns the first of bins found (a name in PATH or a glob).
func find(bins []string) string {
	for _, b := range bins {
		if strings.ContainsRune(b, '/') {
			if m, _ := filepath.Glob(b); len(m) > 0 {
				return m[len(m)-1]
			}
			continue
		}
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	return ""
}

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 20*time.Minute)
	defer cancelTimeout()
	if err := run(ctx); err != nil {
		msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " | ")), " ")
		fmt.Fprintln(os.Stderr, "make test: "+msg)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	fmt.Println("make test: what the tests need (Debian packages are installed only when missing, as root or with sudo):")
	var missing []need
	for _, n := range needs {
		status := ""
		switch reason := skipReason(n); {
		case reason != "":
			status = "not needed: " + reason
		case find(n.bins) != "":
			status = "found " + find(n.bins)
		default:
			status = "missing: installing it now"
			missing = append(missing, n)
		}
		fmt.Printf("  %-23s %-50s %s\n", n.pkg, n.usedBy, status)
	}
	if len(missing) > 0 {
		var pkgs []string
		for _, n := range missing {
			pkgs = append(pkgs, n.pkg)
		}
		list := strings.Join(pkgs, " ")
		hint := fmt.Sprintf("the tests need %s; install them (apt-get install --no-install-recommends %s)", list, list)
		// One apt-get for all: it says how many packages that is.
		if err := localsvc.AptInstallAll(ctx, "make test", pkgs, hint, pkgs...); err != nil {
			return err
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	receiver := filepath.Join(root, "examples", "node-receiver")
	npmMissing, err := localsvc.NpmMissing(receiver)
	if err != nil {
		return err
	}
	if len(npmMissing) > 0 {
		fmt.Printf("make test: %s in examples/node-receiver (the bot package's dependency, pg, and its tests' Baileys; missing: %s)\n",
			strings.Join(localsvc.NpmCIArgs, " "), strings.Join(npmMissing, ", "))
		if _, err := localsvc.Run(ctx, receiver, localsvc.NpmCIArgs...); err != nil {
			return err
		}
	}
	fmt.Println("make test: starting what is not running (the throwaway servers stay up for the next run; `make services-stop` stops them):")
	if _, err := pgtest.ServerURL(ctx); err != nil {
		return err
	}
	if _, err := redistest.ServerURL(ctx); err != nil {
		return err
	}
	fmt.Println("make test: ready; now go test (it prints each package when it is done)")
	return nil
}

// moduleRoot is the folder of go.mod, from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run it inside the repository (no go.mod above the working directory)")
		}
		dir = parent
	}
}

func skipReason(n need) string {
	if n.skip == nil {
		return ""
	}
	return n.skip()
}
