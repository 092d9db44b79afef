package main_test

import (
	"bufio"
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/redistest"
)

func TestMain(m *testing.M) { cmdtest.Main(m) }

const childEnv = "SERVICES_STOP_TEST_CHILD"

// TestChildLeavesACluster is the child's side of TestServicesStop: a test
// process that starts a cluster and a PgBouncer of its own, prints their
// ports and waits to be killed (so its cleanup never runs).
func TestChildLeavesACluster(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		return
	}
	c := pgtest.NewCluster(t)
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	b := pgtest.NewBouncer(t)
	os.Stdout.WriteString("ports: " + u.Port() + " " + strconv.Itoa(b.Port()) + "\n")
	select {} // until killed
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func answers(port string) bool {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 2*time.Second)
	if err == nil {
		conn.Close()
	}
	return err == nil
}

// TestServicesStop (issue 18, item 8: the Redis the tests start had no stop
// command): `make services-stop` stops the throwaway PostgreSQL and Redis
// the tests started, and the cluster and PgBouncer of a test process that
// was killed (SIGKILL: no cleanup ran), and leaves the PgBouncer of a test
// still running alone.
func TestServicesStop(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return
	}
	tmp := t.TempDir()
	for d := tmp; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil { // as root, postgres must reach its files
			t.Fatal(err)
		}
	}
	pgPort, redisPort := freePort(t), freePort(t)
	env := map[string]string{
		"TMPDIR": tmp, "TEST_DATABASE_URL": "", "DATABASE_URL": "", "TEST_REDIS_URL": "", "REDIS_URL": "",
		"PGTEST_PROBE_URL": "none", "PGTEST_DIR": filepath.Join(tmp, "engagement-pgtest"), "PGTEST_PORT": pgPort,
		"REDISTEST_PROBE_ADDR": "none", "REDISTEST_PORT": redisPort,
	}
	stop := cmdtest.Build(t, "./internal/testkit/localsvc/stop") // built before TMPDIR moves
	for k, v := range env {
		t.Setenv(k, v)
	}
	var stopEnv []string
	for k, v := range env {
		stopEnv = append(stopEnv, k+"="+v)
	}
	stopEnv = cmdtest.Env(stopEnv...)
	t.Cleanup(func() { cmdtest.Run(t, stop, stopEnv) }) // should the test fail half-way

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if _, err := pgtest.ServerURL(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := redistest.ServerURL(ctx); err != nil {
		t.Fatal(err)
	}
	live := pgtest.NewBouncer(t)

	child := exec.Command(os.Args[0], "-test.run=^TestChildLeavesACluster$", "-test.count=1") //nolint:gosec // this test binary itself
	child.Env = append(os.Environ(), childEnv+"=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var clusterPort, bouncerPort string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if ports, ok := strings.CutPrefix(sc.Text(), "ports: "); ok {
			clusterPort, bouncerPort, _ = strings.Cut(ports, " ")
			break
		}
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if clusterPort == "" {
		t.Fatal("the child test process did not start its cluster and bouncer")
	}
	for name, port := range map[string]string{"the throwaway PostgreSQL": pgPort, "the throwaway Redis": redisPort,
		"the killed test's cluster": clusterPort, "the killed test's PgBouncer": bouncerPort} {
		if !answers(port) {
			t.Fatalf("%s does not answer on %s before services-stop; the test needs it running", name, port)
		}
	}

	res := cmdtest.Run(t, stop, stopEnv)
	if res.Code != 0 {
		t.Fatalf("services-stop exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	for name, port := range map[string]string{"the throwaway PostgreSQL": pgPort, "the throwaway Redis": redisPort,
		"the killed test's cluster": clusterPort, "the killed test's PgBouncer": bouncerPort} {
		if answers(port) {
			t.Errorf("%s still answers on %s after services-stop\nstdout:\n%s", name, port, res.Stdout)
		}
	}
	if !answers(strconv.Itoa(live.Port())) {
		t.Errorf("services-stop stopped the PgBouncer of a test still running")
	}
	// Issue 31: it says what it stopped, PostgreSQL included.
	for _, want := range []string{"stopped the throwaway PostgreSQL cluster in ", "stopped the throwaway redis-server"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("services-stop's output does not say %q:\n%s", want, res.Stdout)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "pgtest-cluster-*")); len(left) > 0 {
		t.Errorf("the killed test's cluster folder is left: %v", left)
	}
}
