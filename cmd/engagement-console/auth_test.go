package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/syncbuf"
)

// TestTheTrustedHeaderAndGuessesThroughTheBinary is issue 41's curl
// session against the shipped engagement-console: with
// --trusted-user-header X-Forwarded-Email and --htpasswd on every
// interface, `curl -H 'X-Forwarded-Email: ops'` was the operator ops, and
// wrong passwords went through as fast as they came, unlogged. Now the
// binary refuses to start so without --trusted-proxy; with it, the header
// from elsewhere is refused, and guesses are limited and logged.
func TestTheTrustedHeaderAndGuessesThroughTheBinary(t *testing.T) {
	bin := cmdtest.Build(t, "./cmd/engagement-console")
	dbURL := pgtest.NewDatabase(t)
	file := htpasswdFile(t, 5) // htpasswd -nB's cost
	port := freePort(t)
	env := cmdtest.Env("DATABASE_URL="+dbURL, "ENGAGEMENT_CONSOLE_HTPASSWD="+file, "ENGAGEMENT_CONSOLE_OPERATORS=ops")
	args := []string{"--listen", fmt.Sprintf("0.0.0.0:%d", port), "--trusted-user-header", "X-Forwarded-Email", "--log-format", "json"}

	// Without --trusted-proxy, off loopback: exit 2, one line. (Run
	// waits for the exit: before the fix this served, and the test's
	// deadline reports it.)
	cmd, _, stderr := cmdtest.Command(bin, env, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill() //nolint:errcheck // the failure is reported below
		<-exited
		t.Fatalf("the console kept running, believing X-Forwarded-Email from anyone: %s", stderr)
	}
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), "--trusted-proxy") ||
		len(cmdtest.Lines(stderr.String())) != 1 {
		t.Fatalf("without --trusted-proxy: exit %d %s, want 2 and one line naming --trusted-proxy", code, stderr)
	}

	// With a trusted proxy that is not this test's address.
	cmd, _, _ = cmdtest.Command(bin, append(env, "ENGAGEMENT_CONSOLE_TRUSTED_PROXY=192.0.2.0/24"), args...)
	logs := &syncbuf.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() //nolint:errcheck // the exit is checked through done
	defer func() {
		cmd.Process.Signal(os.Interrupt) //nolint:errcheck // it may have exited
		<-done
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: time.Minute}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-done:
			t.Fatalf("the console exited before serving: %s", logs)
		default:
		}
		if resp, err := client.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console did not answer within a minute: %s", logs)
		}
		time.Sleep(50 * time.Millisecond) // polling a starting server, not timing a test
	}
	// answer is what the tests read of a response (its body is closed).
	type answer struct {
		StatusCode int
		Header     http.Header
	}
	get := func(header, password string) answer {
		req, _ := http.NewRequest(http.MethodGet, base+"/queue", nil)
		if header != "" {
			req.Header.Set("X-Forwarded-Email", header)
		}
		if password != "" {
			req.SetBasicAuth("ops", password)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return answer{resp.StatusCode, resp.Header}
	}
	if resp := get("ops", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("curl -H 'X-Forwarded-Email: ops' from 127.0.0.1: %d, want 401", resp.StatusCode)
	}
	if resp := get("", opsPassword); resp.StatusCode != http.StatusOK {
		t.Errorf("ops with the password: %d, want 200", resp.StatusCode)
	}
	codes := map[int]int{}
	for i := range 30 {
		resp := get("", fmt.Sprintf("guess-%d", i))
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	if codes[http.StatusUnauthorized] != 10 || codes[http.StatusTooManyRequests] != 20 {
		t.Errorf("30 wrong passwords: %v, want 10 answered 401, then 429", codes)
	}
	// The signed-in operator is not held up by the guesses.
	if resp := get("", opsPassword); resp.StatusCode != http.StatusOK {
		t.Errorf("ops with the password after the guesses: %d, want 200", resp.StatusCode)
	}
	failed := 0
	for _, line := range cmdtest.Lines(logs.String()) {
		var l struct{ Message, Client, User string }
		if json.Unmarshal([]byte(line), &l) != nil || l.Message != "login failed" {
			continue
		}
		failed++
		if l.Client != "127.0.0.1" || l.User != "ops" {
			t.Errorf("login failed without the client and user: %s", line)
		}
	}
	if failed != 10 || strings.Contains(logs.String(), "guess-") {
		t.Errorf("%d login failed lines, want 10 and no password:\n%s", failed, logs)
	}
}
