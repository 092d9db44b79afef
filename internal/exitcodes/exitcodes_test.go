// Package exitcodes_test holds the exit-code matrix every binary shares: a
// missing DATABASE_URL, an unknown flag or a garbage flag value is exit 2;
// an unreachable database is exit 1 within the connect timeout; none of them
// writes to stdout, prints more than one line, leaks the password or shows a
// Go stack trace. It needs no PostgreSQL: the "database" is a closed port
// or a local listener that accepts and never answers.
package exitcodes_test

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// The password of every unreachable DATABASE_URL. The "/" is URL-encoded in
// the URL, so both spellings are checked for.
const (
	password        = "s3cr3t/Pw-9f2"
	passwordEncoded = "s3cr3t%2FPw-9f2"
)

// invocation is one way to run a binary that needs the database.
type invocation struct {
	name string
	pkg  string
	args []string // the command and flags of a run that would connect
	// garbage are flag values the binary must reject before connecting:
	// the flag, its value and, when the message does not name the flag,
	// what it says instead.
	garbage [][]string
}

const userID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

var jobGarbage = [][]string{
	{"--as-of", "junk"},
	{"--as-of", "2026-13-01T00:00:00Z"},
	{"--output", "xml"},
	{"--shard", "9/3"},
	{"--shard", "half"},
	{"--batch-size", "0"},
	{"--concurrency", "many"},
	{"--transport", "carrier-pigeon", "transport"},
}

var invocations = []invocation{
	{name: "engagement-daily", pkg: "./cmd/engagement-daily", garbage: jobGarbage},
	{name: "engagement-weekly", pkg: "./cmd/engagement-weekly", garbage: jobGarbage},
	{name: "queue-process", pkg: "./cmd/queue-process", args: []string{"--transport", "log"}, garbage: [][]string{
		{"--output", "xml"},
		{"--send-interval", "soon"},
		{"--retry-base", "0s"},
		{"--max-retries", "-1"},
		{"--workers", "0"},
		{"--transport", "carrier-pigeon", "transport"},
	}},
	{name: "engagementctl status", pkg: "./cmd/engagementctl", args: []string{"status"}, garbage: [][]string{
		{"--as-of", "junk"},
		{"--output", "xml"},
		{"--runs", "0"},
	}},
	{name: "engagementctl verify", pkg: "./cmd/engagementctl", args: []string{"verify"}, garbage: [][]string{
		{"--output", "xml"},
		{"--retention", "forever"},
	}},
	{name: "engagementctl migrate up", pkg: "./cmd/engagementctl", args: []string{"migrate", "up"}},
	{name: "engagementctl cleanup", pkg: "./cmd/engagementctl", args: []string{"cleanup"}, garbage: [][]string{
		{"--older-than", "0s"},
		{"--batch-size", "0"},
	}},
	{name: "engagementctl enqueue", pkg: "./cmd/engagementctl",
		args: []string{"enqueue", "--user-id", userID, "--type", "weekly_review", "--jid", "5511999990000@s.whatsapp.net"},
		garbage: [][]string{
			{"--user-id", "not-a-uuid"},
			{"--scheduled-for", "tomorrow"},
			{"--params", "[1,2]"},
			{"--destination", "everyone"},
			{"--idempotency-key", strings.Repeat("k", 129), "128 characters"},
		}},
}

// blackhole is a listener on 127.0.0.1 that accepts connections and never
// answers: a database host whose port is open but whose server hangs. It
// returns the port.
func blackhole(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read or written
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

func databaseURL(port int, query string) string {
	u := "postgres://scheduler:" + passwordEncoded + "@127.0.0.1:" + strconv.Itoa(port) + "/engagement"
	if query != "" {
		u += "?" + query
	}
	return u
}

// matrixCase is one run of one binary and what it must do.
type matrixCase struct {
	name     string
	bin      string
	env      []string
	args     []string
	wantCode int
	want     string        // stderr mentions this
	bound    time.Duration // > 0: the run ends within this long
	atLeast  time.Duration // > 0: and not before (it really waited)
}

type outcome struct {
	res  cmdtest.Result
	took time.Duration
}

// hangLimit is when a run is killed: one that hangs is a failure, not a
// test timeout.
const hangLimit = 20 * time.Second

// run runs c's binary to its end, or kills it after hangLimit.
func run(t *testing.T, c matrixCase) outcome {
	cmd, stdout, stderr := cmdtest.Command(c.bin, cmdtest.Env(c.env...), c.args...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Errorf("start %s: %v", c.name, err)
		return outcome{res: cmdtest.Result{Code: -1}}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(hangLimit):
			_ = cmd.Process.Kill()
		}
	}()
	_ = cmd.Wait()
	close(done)
	took := time.Since(start)
	return outcome{cmdtest.Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}, took}
}

func TestExitCodeMatrix(t *testing.T) {
	t.Parallel()
	if pw, _ := url.PathUnescape(passwordEncoded); pw != password {
		t.Fatalf("the test's password constants disagree: %q", pw)
	}
	const (
		connectTimeout = time.Second
		margin         = 2500 * time.Millisecond // process start-up on a loaded 2-core CI runner
	)
	hole := blackhole(t)
	closedPort := 1 // nothing listens on 127.0.0.1:1: connection refused

	var cases []matrixCase
	for _, inv := range invocations {
		bin := cmdtest.Build(t, inv.pkg)
		args := func(more ...string) []string { return append(append([]string(nil), inv.args...), more...) }
		// A garbage value is rejected before any work: were the URL
		// (a closed port) tried first, the exit would be 1.
		unreachable := "DATABASE_URL=" + databaseURL(closedPort, "connect_timeout=1")
		cases = append(cases,
			matrixCase{name: inv.name + "/no DATABASE_URL", bin: bin, args: args(), wantCode: 2, want: "DATABASE_URL"},
			matrixCase{name: inv.name + "/blank DATABASE_URL", bin: bin, env: []string{"DATABASE_URL=  "}, args: args(), wantCode: 2, want: "DATABASE_URL"},
			matrixCase{name: inv.name + "/unknown flag", bin: bin, env: []string{unreachable}, args: args("--no-such-flag"), wantCode: 2, want: "unknown flag"},
			matrixCase{name: inv.name + "/connection refused", bin: bin,
				env: []string{"DATABASE_URL=" + databaseURL(closedPort, "connect_timeout=1")}, args: args(),
				wantCode: 1, bound: connectTimeout + margin},
			matrixCase{name: inv.name + "/connection refused, URL as a flag", bin: bin,
				args: args("--database-url", databaseURL(closedPort, "connect_timeout=1")), wantCode: 1, bound: connectTimeout + margin},
			matrixCase{name: inv.name + "/server never answers, connect_timeout=1", bin: bin,
				env: []string{"DATABASE_URL=" + databaseURL(hole, "connect_timeout=1")}, args: args(),
				wantCode: 1, want: "connect", bound: connectTimeout + margin, atLeast: connectTimeout - 100*time.Millisecond},
			// Without connect_timeout in the URL, the default bounds it.
			matrixCase{name: inv.name + "/server never answers, default timeout", bin: bin,
				env: []string{"DATABASE_URL=" + databaseURL(hole, "")}, args: args(),
				wantCode: 1, want: "connect", bound: postgres.DefaultConnectTimeout + margin,
				atLeast: postgres.DefaultConnectTimeout - 100*time.Millisecond},
			matrixCase{name: inv.name + "/unparsable DATABASE_URL", bin: bin,
				env: []string{"DATABASE_URL=" + databaseURL(closedPort, "connect_timeout=soon")}, args: args(),
				// A configuration error, found before any work.
				wantCode: 2, want: "invalid database URL"},
		)
		for _, g := range inv.garbage {
			want := g[0]
			if len(g) > 2 {
				want = g[2]
			}
			cases = append(cases, matrixCase{name: inv.name + "/" + g[0] + " " + g[1][:min(len(g[1]), 20)], bin: bin,
				env: []string{unreachable}, args: args(g[:2]...), wantCode: 2, want: want})
		}
	}

	// Every run at once: most wait on a timeout, and -parallel is only
	// GOMAXPROCS on a small runner.
	results := make([]outcome, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() { results[i] = run(t, c) })
	}
	wg.Wait()

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, took := results[i].res, results[i].took
			if res.Code != c.wantCode {
				t.Errorf("exit %d, want %d; stderr: %s", res.Code, c.wantCode, res.Stderr)
			}
			if res.Stdout != "" {
				t.Errorf("stdout %q, want nothing on an error", res.Stdout)
			}
			lines := cmdtest.Lines(res.Stderr)
			binName := strings.Fields(c.name)[0]
			binName, _, _ = strings.Cut(binName, "/")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], binName+": ") {
				t.Errorf("stderr %q, want one line starting %q", res.Stderr, binName+": ")
			}
			if !strings.Contains(res.Stderr, c.want) {
				t.Errorf("stderr %q does not mention %q", res.Stderr, c.want)
			}
			for _, leak := range []string{password, passwordEncoded, "goroutine", "panic", "runtime/", ".go:"} {
				if strings.Contains(res.Stderr, leak) {
					t.Errorf("stderr contains %q: %s", leak, res.Stderr)
				}
			}
			if c.bound > 0 && took > c.bound {
				t.Errorf("took %s, want at most %s (the connect timeout bounds it)", took.Round(time.Millisecond), c.bound)
			}
			if c.atLeast > 0 && took < c.atLeast {
				t.Errorf("took %s, want at least %s: it should have waited for the silent server", took.Round(time.Millisecond), c.atLeast)
			}
		})
	}
}
