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

const (
	childEnv = "SERVICES_STOP_TEST_CHILD"
	freshEnv = "SERVICES_STOP_TEST_FRESH"
)

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

// TestServicesStopLeavesWhatItDidNotStart (issue 42, item 7): from a chroot,
// which shares the machine's processes, services-stop took a Redis on the
// host for its own because its working directory had the same name, and
// stopped it. A stop ends only the processes this checkout started and
// recorded. Here an unrelated redis-server works in the throwaway Redis's
// very folder, and the throwaway PostgreSQL's folder holds a stale
// postmaster.pid naming another running cluster's postmaster (as a
// chroot's or a crashed cluster's may): services-stop stops the Redis it
// started and leaves both of the others running.
func TestServicesStopLeavesWhatItDidNotStart(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return
	}
	// In a process of its own: redistest and pgtest keep the server they
	// found for the whole process, and TestServicesStop's is gone.
	if os.Getenv(freshEnv) == "" {
		child := exec.Command(os.Args[0], "-test.run=^TestServicesStopLeavesWhatItDidNotStart$", "-test.count=1", "-test.v") //nolint:gosec // this test binary itself
		child.Env = append(os.Environ(), freshEnv+"=1")
		if out, err := child.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	tmp := t.TempDir()
	for d := tmp; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil { // as root, postgres must reach its files
			t.Fatal(err)
		}
	}
	redisPort, otherRedisPort := freePort(t), freePort(t)
	pgDir := filepath.Join(tmp, "engagement-pgtest")
	env := map[string]string{
		"TMPDIR": tmp, "TEST_DATABASE_URL": "", "DATABASE_URL": "", "TEST_REDIS_URL": "", "REDIS_URL": "",
		"PGTEST_PROBE_URL": "none", "PGTEST_DIR": pgDir, "PGTEST_PORT": freePort(t),
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

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if _, err := redistest.ServerURL(ctx); err != nil {
		t.Fatal(err)
	}
	redisDir := filepath.Join(tmp, "engagement-redistest")
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	other := exec.Command(bin, "--port", otherRedisPort, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", redisDir) //nolint:gosec // the test's own server
	other.Dir = redisDir
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() }) //nolint:errcheck // the test's own server, gone or not

	// Another cluster, running; the throwaway folder made to look like
	// pgtest's, with a postmaster.pid that names the other's postmaster.
	cluster := pgtest.NewCluster(t)
	u, err := url.Parse(cluster.URL)
	if err != nil {
		t.Fatal(err)
	}
	pidFiles, _ := filepath.Glob(filepath.Join(tmp, "pgtest-cluster-*", "data", "postmaster.pid"))
	if len(pidFiles) != 1 {
		t.Fatalf("found %v, want the other cluster's one postmaster.pid", pidFiles)
	}
	pidFile, err := os.ReadFile(pidFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(pgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"PG_VERSION": []byte("15\n"), "engagement-pgtest.conf": nil, "postmaster.pid": pidFile} {
		if err := os.WriteFile(filepath.Join(pgDir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, port := range map[string]string{"the throwaway Redis": redisPort, "the other Redis": otherRedisPort, "the other cluster": u.Port()} {
		if !answers(port) {
			t.Fatalf("%s does not answer on %s before services-stop; the test needs it running", name, port)
		}
	}

	res := cmdtest.Run(t, stop, stopEnv)
	if res.Code != 0 {
		t.Errorf("services-stop exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if answers(redisPort) {
		t.Errorf("the throwaway Redis still answers on %s after services-stop", redisPort)
	}
	if !answers(otherRedisPort) {
		t.Errorf("services-stop stopped a redis-server it did not start, because it worked in the same folder")
	}
	if !answers(u.Port()) {
		t.Errorf("services-stop stopped a PostgreSQL cluster it did not start, named by a stale postmaster.pid")
	}
	if strings.Contains(res.Stdout, "PostgreSQL") {
		t.Errorf("services-stop says it stopped a PostgreSQL cluster:\n%s", res.Stdout)
	}
}
