package cli_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/engagement-scheduler/engagement/internal/cli"
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
	running := cmdtest.Start(cli.NewConsoleCommand, cmdtest.Env("DATABASE_URL="+url, "PORT="+fmt.Sprint(port),
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
	res := cmdtest.Exec(t, cli.NewConsoleCommand, cmdtest.Env("DATABASE_URL="+url, "PORT=8080"))
	if res.Code != cli.ExitUsage || !strings.Contains(res.Stderr, "refusing to serve the console without authentication") {
		t.Fatalf("open on :8080: exit %d %s, want 2 with the reason", res.Code, res.Stderr)
	}
	if n := len(cmdtest.Lines(res.Stderr)); n != 1 {
		t.Errorf("the refusal is %d lines, want one", n)
	}
}
