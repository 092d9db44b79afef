package main_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// binaries is a folder holding the named binaries, built, as the demo's
// -bin.
func binaries(t *testing.T, names ...string) string {
	t.Helper()
	bin := t.TempDir()
	for _, name := range names {
		if err := os.Symlink(cmdtest.Build(t, "./cmd/"+name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// TestDemo runs the demo as `make demo` does, on a database of its own,
// and checks that a newcomer sees users move, messages delivered, and a
// clean bill from status and verify.
func TestDemo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server, err := pgtest.ServerURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bin := binaries(t, "engagement-daily", "engagement-weekly", "queue-process", "engagementctl")
	const database = "engagement_demo_test"
	t.Cleanup(func() {
		if err := pgtest.DropDatabase(context.Background(), database); err != nil {
			t.Errorf("drop the demo's database: %v", err)
		}
	})

	demo := cmdtest.Build(t, "./internal/demo")
	res := cmdtest.Run(t, demo, cmdtest.Env("TEST_DATABASE_URL="+server), "-bin", bin, "-database", database, "-users", "200")
	if res.Code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	// At any hour some of the demo's users (São Paulo, Lisbon, Tokyo) are
	// awake: the first delivery sends to them, never fails, and holds the
	// rest for their morning.
	sent := regexp.MustCompile(`queue-process via log: (\d+) processed, (\d+) sent, 0 retried, 0 failed, 0 cancelled, (\d+) deferred`).FindStringSubmatch(res.Stdout)
	if sent == nil || sent[1] == "0" || sent[1] != sent[2] {
		t.Errorf("the demo does not show messages delivered; stdout:\n%s", res.Stdout)
	}
	// Issue 23, point 1: the demo delivers in waking hours, as shipped.
	for _, line := range strings.Split(res.Stdout, "\n") {
		if strings.HasPrefix(line, "$ queue-process ") && !strings.Contains(line, "--quiet-hours 21:00-09:00 --timezone America/Sao_Paulo") {
			t.Errorf("the demo delivers without the shipped quiet hours: %s", line)
		}
	}
	// Every simulated delivery is as of a whole hour, like the times quiet
	// hours and best hours send at: one as of 14:59 found a message due at
	// 15:00 and waited a real minute for it, twelve times over when the
	// demo started in an hour's last minute.
	asOf := regexp.MustCompile(`--as-of (\S+)`)
	for _, line := range strings.Split(res.Stdout, "\n") {
		m := asOf.FindStringSubmatch(line)
		if !strings.HasPrefix(line, "$ queue-process ") || m == nil {
			continue
		}
		if at, err := time.Parse(time.RFC3339, m[1]); err != nil || !at.Equal(at.Truncate(time.Hour)) {
			t.Errorf("the demo delivers as of an instant that is not a whole hour: %s", line)
		}
	}
	if !regexp.MustCompile(`\(\d{4}-W\d{2}\)`).MatchString(res.Stdout) {
		t.Errorf("the demo's output lacks the weekly job's ISO week; stdout:\n%s", res.Stdout)
	}
	for _, want := range []string{
		"inactivity_14d",          // the daily job's summary
		"$ queue-process",         // delivery
		"goodbye_sent",            // users moved
		"engagement status as of", // engagementctl status
		"all invariants hold",     // engagementctl verify
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("the demo's output lacks %q; stdout:\n%s", want, res.Stdout)
		}
	}
	if strings.Contains(res.Stdout+res.Stderr, "@s.whatsapp.net") {
		t.Error("the demo printed a WhatsApp JID")
	}
}

// TestDemoStopsTheClusterItStarts (issue 18, item 8: the demo printed that
// the cluster "stays running for the next run", then stopped it): with no
// PostgreSQL to find, the demo starts a throwaway cluster of its own, says
// it will stop it, and does: afterwards nothing answers on its port.
func TestDemoStopsTheClusterItStarts(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	for _, name := range []string{"engagement-daily", "engagement-weekly", "queue-process", "engagementctl"} {
		if err := os.Symlink(cmdtest.Build(t, "./cmd/"+name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	// As root the cluster runs as postgres, which must reach its directory.
	base, err := os.MkdirTemp("", "engagement-demo-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	env := cmdtest.Env("PGTEST_PROBE_URL=none", "PGTEST_DIR="+filepath.Join(base, "data"), "PGTEST_PORT="+port)
	t.Cleanup(func() {
		// Should the demo not have stopped it.
		if res := cmdtest.Run(t, cmdtest.Build(t, "./internal/testkit/pgtest/devdb"), env, "--stop"); res.Code != 0 {
			t.Errorf("devdb --stop: %+v", res)
		}
		os.RemoveAll(base)
	})

	res := cmdtest.Run(t, cmdtest.Build(t, "./internal/demo"), env, "-bin", bin, "-users", "20")
	if res.Code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "pgtest: started the throwaway PostgreSQL cluster") || !strings.Contains(res.Stdout, "Stopping the throwaway PostgreSQL") {
		t.Errorf("the demo does not say it started and stops its cluster\nstdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	}
	if strings.Contains(res.Stdout+res.Stderr, "stays running") {
		t.Errorf("the demo says the cluster stays running, and stops it\nstderr:\n%s", res.Stderr)
	}
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 2*time.Second); err == nil {
		conn.Close()
		t.Errorf("the demo's cluster still answers on port %s after the demo", port)
	}
}
