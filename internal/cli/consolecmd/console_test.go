package consolecmd_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/consolecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// freePort is a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitUp polls url until it answers (the server is starting in the
// background), failing after a minute.
func waitUp(t *testing.T, url string, running *cmdtest.Running) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-running.Done():
			res := running.Wait()
			t.Fatalf("the console exited %d before serving: %s", res.Code, res.Stderr)
		default:
		}
		if resp, err := http.Get(url); err == nil { //nolint:gosec // the test's own server
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond) // polling a starting server, not timing a test
	}
	t.Fatalf("%s did not answer within a minute", url)
}

func TestConsoleServesWithHtpasswdAndStopsCleanly(t *testing.T) {
	url := pgtest.NewDatabase(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(file, []byte("# operators\nops:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	// PORT alone would listen on every interface: with htpasswd that is allowed.
	running := cmdtest.Start(consolecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url, "PORT="+fmt.Sprint(port),
		"ENGAGEMENT_CONSOLE_HTPASSWD="+file, "ENGAGEMENT_CONSOLE_OPERATORS=ops"), "--log-format", "json")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitUp(t, base+"/healthz", running)

	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET / without credentials: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
	req.SetBasicAuth("ops", "pw")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET / as ops: %d, want 200", resp.StatusCode)
	}

	res := running.Stop()
	if res.Code != cli.ExitOK {
		t.Fatalf("stopped console: exit %d, want 0\n%s", res.Code, res.Stderr)
	}
	if !strings.Contains(res.Stderr, `"message":"console stopped"`) || strings.Contains(res.Stderr, string(hash)) {
		t.Errorf("stderr: %s\nwant the stop logged and no hash", res.Stderr)
	}
}

func TestConsoleRefusesToServeOpenBeyondLoopback(t *testing.T) {
	url := pgtest.NewDatabase(t)
	res := cmdtest.Exec(t, consolecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url, "PORT=8080"))
	if res.Code != cli.ExitUsage || !strings.Contains(res.Stderr, "refusing to serve the console without authentication") {
		t.Fatalf("open on :8080: exit %d %s, want 2 with the reason", res.Code, res.Stderr)
	}
	if n := len(cmdtest.Lines(res.Stderr)); n != 1 {
		t.Errorf("the refusal is %d lines, want one", n)
	}
}

// --replica-url (ENGAGEMENT_CONSOLE_REPLICA_URL) is opened as the
// database is, and the snapshot pages read from it. Given the primary's
// own URL, the console says so at start and on the pages, and serves.
func TestConsoleReplicaURL(t *testing.T) {
	url := pgtest.NewDatabase(t)
	port := freePort(t)
	running := cmdtest.Start(consolecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_CONSOLE_REPLICA_URL="+url),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-format", "json")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitUp(t, base+"/healthz", running)
	resp, err := http.Get(base + "/queue")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Replica-Lag") != "0" || !strings.Contains(string(body), "is not a standby") {
		t.Errorf("GET /queue with the primary as the replica: %d, X-Replica-Lag %q, want 200, 0 and the footer saying it is not a standby",
			resp.StatusCode, resp.Header.Get("X-Replica-Lag"))
	}
	res := running.Stop()
	if res.Code != cli.ExitOK {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	if !strings.Contains(res.Stderr, `"replica":true`) || !strings.Contains(res.Stderr, "the --replica-url server is not a standby") {
		t.Errorf("the log does not say the pages read from a replica that is not a standby:\n%s", res.Stderr)
	}
}

// A replica URL that does not parse is a usage error (exit 2), one that
// does not answer fails the start (exit 1); neither shows its password.
func TestConsoleReplicaURLErrorsHideThePassword(t *testing.T) {
	url := pgtest.NewDatabase(t)
	for _, tc := range []struct {
		replica string
		code    int
	}{
		{"postgres://ops:s3cret-pw@127.0.0.1:notaport/db", cli.ExitUsage},
		{fmt.Sprintf("postgres://ops:s3cret-pw@127.0.0.1:%d/db?connect_timeout=2", freePort(t)), cli.ExitFatal},
	} {
		res := cmdtest.Exec(t, consolecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_CONSOLE_REPLICA_URL="+tc.replica),
			"--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		if res.Code != tc.code || !strings.Contains(res.Stderr, "replica-url") {
			t.Errorf("replica %s: exit %d %s, want %d naming --replica-url", tc.replica, res.Code, res.Stderr, tc.code)
		}
		if strings.Contains(res.Stdout+res.Stderr, "s3cret-pw") {
			t.Errorf("replica %s: the password is in the output: %s", tc.replica, res.Stderr)
		}
	}
}
