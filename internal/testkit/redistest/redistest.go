// Package redistest gives tests real Redis: like pgtest for PostgreSQL, there
// is no mock. The server is found or started once per process (ServerURL):
//
//  1. TEST_REDIS_URL if set, else REDIS_URL if set, used as-is (a go-redis
//     URL, redis://host:port/db).
//  2. Else REDISTEST_PROBE_ADDR (default 127.0.0.1:6379) if it answers PING
//     within about a second. Set REDISTEST_PROBE_ADDR=none to skip the probe.
//  3. Else a throwaway server that this package starts itself: redis-server
//     on 127.0.0.1, port REDISTEST_PORT (default 63790), without persistence
//     (--save "" --appendonly no), daemonized, working directory
//     $TMPDIR/engagement-redistest (its log is redis.log there). The binary is
//     taken from PATH; when missing, the redis-server package is installed
//     with apt-get (as root, or through sudo -n; its system service is left
//     stopped and disabled). The server is left running so the next run
//     reuses it; stop it with `make services-stop` (StopThrowaway). A lock
//     file next to the directory serializes test processes that race to
//     start it. A server already answering on the port is used only when it
//     is the one this checkout started and recorded (its process_id); any
//     other is refused, with what to do.
//
// Each New call returns a client on that server and a random key prefix
// ("redistest:<hex>:"); the test's keys must start with it. They are deleted
// (SCAN prefix* + DEL) and the client closed in t.Cleanup.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
)

const (
	defaultProbeAddr = "127.0.0.1:6379"
	defaultPort      = 63790

	// setupTimeout bounds finding or starting the server, which may include
	// installing redis-server.
	setupTimeout = 10 * time.Minute
)

var server = localsvc.Resolver{Timeout: setupTimeout, Find: resolveServer}

// ServerURL returns the URL of the Redis server tests use; see the package
// comment for how it is found. The answer (or error) is computed once per
// process. Cancelling ctx abandons the wait without spoiling the cached
// answer.
func ServerURL(ctx context.Context) (string, error) { return server.URL(ctx) }

// New returns a client on the test server and a fresh random key prefix
// ("redistest:<16 hex>:"). In t.Cleanup, the keys starting with the prefix
// are deleted and the client is closed. Any failure is fatal.
func New(t testing.TB) (client *redis.Client, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	u, err := ServerURL(ctx)
	if err != nil {
		t.Fatalf("redistest: no Redis server for tests: %v", err)
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("redistest: parse %s: %v", redact(u), err)
	}
	client = redis.NewClient(opts)
	prefix = "redistest:" + randomHex(8) + ":"
	t.Cleanup(func() {
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := deletePrefix(ctx, client, prefix); err != nil {
			t.Errorf("redistest: delete the keys %s*: %v", prefix, err)
		}
	})
	pingCtx, pingCancel := context.WithTimeout(ctx, 10*time.Second)
	defer pingCancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		t.Fatalf("redistest: ping %s: %v", redact(u), err)
	}
	return client, prefix
}

// deletePrefix deletes every key starting with prefix (which holds no glob
// characters).
func deletePrefix(ctx context.Context, client *redis.Client, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := client.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := client.Del(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

func resolveServer(ctx context.Context) (string, error) {
	for _, env := range []string{"TEST_REDIS_URL", "REDIS_URL"} {
		if u := os.Getenv(env); u != "" {
			return u, nil
		}
	}
	probe := os.Getenv("REDISTEST_PROBE_ADDR")
	if probe == "" {
		probe = defaultProbeAddr
	}
	var probeErr error
	if probe == "none" {
		probeErr = errors.New("skipped (REDISTEST_PROBE_ADDR=none)")
	} else if probeErr = ping(ctx, probe); probeErr == nil {
		return "redis://" + probe, nil
	}
	port := defaultPort
	if p := os.Getenv("REDISTEST_PORT"); p != "" {
		var err error
		if port, err = strconv.Atoi(p); err != nil || port <= 0 || port > 65535 {
			return "", fmt.Errorf("REDISTEST_PORT=%q is not a port number", p)
		}
	}
	dir := throwawayDir()
	u, err := startThrowaway(ctx, dir, port)
	if err != nil {
		return "", fmt.Errorf("TEST_REDIS_URL and REDIS_URL are unset, %s does not answer (%v), "+
			"and starting redis-server on port %d failed: %w\n"+
			"Install the redis-server package or set REDIS_URL", probe, probeErr, port, err)
	}
	return u, nil
}

// throwawayDir is the working directory of the throwaway server.
func throwawayDir() string { return filepath.Join(os.TempDir(), "engagement-redistest") }

// StopThrowaway stops the throwaway redis-server this package started, if
// it runs, and reports whether it did: the process whose pid and start
// time startThrowaway recorded, and no other. A Redis found running
// elsewhere, or in the same folder but started by someone else (another
// checkout, a chroot sharing this machine's processes), is left alone.
func StopThrowaway() (bool, error) { return stopThrowaway(throwawayDir()) }

// stopThrowaway stops the redis-server startThrowaway started working in
// dir, if it runs, and reports whether it did.
func stopThrowaway(dir string) (bool, error) {
	record := startedFile(dir)
	pid := localsvc.Recorded(record, "redis-server")
	if pid == 0 {
		os.Remove(record) // stale: that server is gone
		return false, nil
	}
	if err := localsvc.Terminate(pid, syscall.SIGTERM, 10*time.Second); err != nil {
		return false, fmt.Errorf("stop the throwaway redis-server: %w", err)
	}
	os.Remove(record)
	return true, nil
}

// startedFile is where startThrowaway records the server it started.
func startedFile(dir string) string { return dir + ".started" }

// startThrowaway makes sure a redis-server answers on 127.0.0.1:port,
// starting one (daemonized, working in dir) if needed, and returns its URL.
func startThrowaway(ctx context.Context, dir string, port int) (string, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	u := "redis://" + addr + "/0"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := localsvc.LockFile(ctx, dir+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if ping(ctx, addr) == nil {
		// Started by an earlier run or a racing process, if it is the
		// server this checkout started in dir: another checkout's (or
		// anyone's) may hold the port.
		if err := checkOwn(ctx, addr, dir); err != nil {
			return "", err
		}
		return u, nil
	}
	bin, err := findOrInstallRedis(ctx)
	if err != nil {
		return "", err
	}
	logPath, pidPath := filepath.Join(dir, "redis.log"), filepath.Join(dir, "redis.pid")
	os.Remove(pidPath)
	if _, err := localsvc.Run(ctx, dir, bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--daemonize", "yes", "--dir", dir, "--logfile", logPath, "--pidfile", pidPath); err != nil {
		return "", err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(ctx, addr)
		if err == nil {
			// What services-stop may stop: this server, by its pid.
			if err = recordStarted(dir, pidPath); err != nil {
				return "", err
			}
			fmt.Fprintf(os.Stderr, "redistest: started redis-server on 127.0.0.1:%d (log %s); "+
				"it stays running for the next run; stop it with `make services-stop`\n", port, logPath)
			return u, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("redis-server started but 127.0.0.1:%d does not answer: %w\nlast lines of %s:\n%s\n(is the port taken by another program? set REDISTEST_PORT)",
				port, err, logPath, localsvc.Tail(logPath, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkOwn returns an error unless the redis-server answering on addr is
// the one startThrowaway started working in dir: the process it recorded
// (its pid and start time, startedFile), by the process_id the server
// gives. The error says whose it is and what to do.
func checkOwn(ctx context.Context, addr, dir string) error {
	pid, err := serverPid(ctx, addr)
	own := localsvc.Recorded(startedFile(dir), "redis-server")
	if err == nil && pid == own {
		return nil
	}
	what := fmt.Sprintf("process %d", pid)
	if err != nil {
		what = "a server that does not say which process it is (" + err.Error() + ")"
	}
	mine := "none runs"
	if own != 0 {
		mine = fmt.Sprintf("it is process %d", own)
	}
	return fmt.Errorf("%s answers PING, but not with the redis-server this checkout started working in %s (%s): it is %s, "+
		"another checkout's or another program's, and redistest does not use it. Stop that server, or set REDISTEST_PORT to a free port, "+
		"or REDIS_URL to a server to use", addr, dir, mine, what)
}

// serverPid asks the Redis server at addr for its process_id (INFO
// server), speaking the protocol itself as ping does.
func serverPid(ctx context.Context, addr string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return 0, err
	}
	rd := bufio.NewReader(conn)
	head, err := rd.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(head), "$"))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("INFO server answered %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(rd, body); err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// recordStarted records the server whose pid the daemonized redis-server
// wrote to pidPath (it writes it as it starts: by the time it answers PING
// the file is there).
func recordStarted(dir, pidPath string) error {
	b, err := os.ReadFile(pidPath)
	if err != nil {
		return fmt.Errorf("read the started redis-server's pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("read the started redis-server's pid from %s: %w", pidPath, err)
	}
	return localsvc.RecordProcess(startedFile(dir), pid)
}

// findOrInstallRedis finds redis-server in PATH, installing the Debian
// redis-server package (apt-get, as root or through sudo -n) when missing;
// the package's system service is left stopped and disabled.
func findOrInstallRedis(ctx context.Context) (string, error) {
	if bin, err := exec.LookPath("redis-server"); err == nil {
		return bin, nil
	}
	hint := "redis-server is not in PATH; install the redis-server package (apt-get install --no-install-recommends redis-server) or set REDIS_URL"
	if err := localsvc.AptInstall(ctx, "redistest", "redis-server", hint, "redis-server"); err != nil {
		return "", err
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("redis-server is not in PATH even after installing the redis-server package")
	}
	return bin, nil
}

// ping sends PING to the server at addr (host:port) and expects PONG,
// giving up after about a second. It speaks the protocol itself so that a
// probe that fails is not logged by go-redis.
func ping(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// redact hides the password of a URL for error messages.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil && strings.Contains(s, "://") {
		return u.Redacted()
	}
	return s
}
