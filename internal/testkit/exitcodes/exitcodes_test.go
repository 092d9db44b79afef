// Package exitcodes_test holds the exit-code matrix every binary shares: a
// missing DATABASE_URL, an unknown flag or a garbage flag value is exit 2;
// an unreachable database is exit 1 within the connect timeout; none of them
// writes to stdout, prints more than one line (a JSON log line: stderr is
// not a terminal), leaks the password or shows a Go stack trace; and every
// line any binary or engagementctl command writes to stderr as it fails is
// a JSON log line (jsonlogs_test.go). It needs no PostgreSQL: the
// "database" is a closed port or a local listener that accepts and never
// answers. Each binary's command runs in process, as its main runs it
// (cli.Main), with the environment the case gives, and, where what reaches
// the process's own stderr counts, as the built binary.
package exitcodes_test

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/consolecmd"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
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
	cmd  func() *cobra.Command // the binary's command, as its main builds it
	args []string              // the command and flags of a run that would connect
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
	// The queue step's flags are checked without a transport too.
	{"--workers", "0"},
	{"--max-retries", "-1"},
	{"--log-format", "xml"},
}

// dailyGarbage adds the daily job's own flags: the goodbye's holdout.
var dailyGarbage = append(append([][]string{}, jobGarbage...),
	[]string{"--holdout-percent", "101"},
	[]string{"--holdout-percent", "ten"},
	[]string{"--holdout-percent", "-0.5"},
)

var invocations = []invocation{
	{name: "engagement-daily", cmd: jobcmd.NewDailyCommand, garbage: dailyGarbage},
	{name: "engagement-weekly", cmd: jobcmd.NewWeeklyCommand, garbage: jobGarbage},
	{name: "queue-process", cmd: queuecmd.NewCommand, args: []string{"--transport", "log"}, garbage: [][]string{
		{"--output", "xml"},
		{"--send-interval", "soon"},
		{"--retry-base", "0s"},
		{"--max-retries", "-1"},
		{"--workers", "0"},
		{"--transport", "carrier-pigeon", "transport"},
		{"--daily-limit", "-1"},
		{"--daily-limit", "lots"},
		{"--daily-limit-ramp", "50,2", "needs --daily-limit"},
		{"--daily-limit-ramp=50,2", "--warm-up", "--warm-up"},
		{"--reachout-window", "-1h", "--reachout-window"},
		{"--as-of", "junk"},
	}},
	{name: "engagementctl status", cmd: ctl.NewCommand, args: []string{"status"}, garbage: [][]string{
		{"--as-of", "junk"},
		{"--output", "xml"},
		{"--runs", "0"},
	}},
	{name: "engagementctl funnel", cmd: ctl.NewCommand, args: []string{"funnel"}, garbage: [][]string{
		{"--as-of", "junk"},
		{"--output", "xml"},
		{"--weeks", "0"},
	}},
	{name: "engagementctl verify", cmd: ctl.NewCommand, args: []string{"verify"}, garbage: [][]string{
		{"--output", "xml"},
		{"--retention", "forever"},
	}},
	{name: "engagementctl migrate up", cmd: ctl.NewCommand, args: []string{"migrate", "up"}},
	{name: "engagementctl migrate check", cmd: ctl.NewCommand, args: []string{"migrate", "check"}},
	{name: "engagementctl migrate down", cmd: ctl.NewCommand, args: []string{"migrate", "down", "1"}},
	{name: "engagementctl migrate force", cmd: ctl.NewCommand, args: []string{"migrate", "force", "38"}},
	{name: "engagementctl migrate version", cmd: ctl.NewCommand, args: []string{"migrate", "version"}},
	{name: "engagementctl requeue", cmd: ctl.NewCommand, args: []string{"requeue", "--type", "goodbye"}, garbage: [][]string{
		{"--status", "sent"},
		{"--ids", "not-a-uuid"},
		{"--since", "yesterday"},
	}},
	{name: "engagementctl cancel", cmd: ctl.NewCommand, args: []string{"cancel", "--type", "goodbye"}, garbage: [][]string{
		{"--user-id", "not-a-uuid"},
		{"--ids", "not-a-uuid"},
	}},
	{name: "engagementctl smoke", cmd: ctl.NewCommand, args: []string{"smoke"}},
	{name: "engagementctl opt-out", cmd: ctl.NewCommand, args: []string{"opt-out", "--user-id", userID}, garbage: [][]string{
		{"--user-id", "not-a-uuid"},
		{"--source", " ", "--source"},
	}},
	{name: "engagementctl opt-in", cmd: ctl.NewCommand, args: []string{"opt-in", "--user-id", userID}, garbage: [][]string{
		{"--user-id", "5511999990000"},
	}},
	{name: "engagementctl erase", cmd: ctl.NewCommand, args: []string{"erase", "--user-id", userID, "--yes"}, garbage: [][]string{
		{"--user-id", "not-a-uuid"},
	}},
	{name: "engagementctl categories list", cmd: ctl.NewCommand, args: []string{"categories", "list"}, garbage: [][]string{
		{"--output", "xml"},
	}},
	{name: "engagementctl categories set", cmd: ctl.NewCommand, args: []string{"categories", "set", "promo", "utility"}},
	{name: "engagementctl categories unset", cmd: ctl.NewCommand, args: []string{"categories", "unset", "promo"}},
	{name: "engagementctl pause list", cmd: ctl.NewCommand, args: []string{"pause", "list"}, garbage: [][]string{
		{"--output", "xml"},
	}},
	{name: "engagementctl pause clear", cmd: ctl.NewCommand, args: []string{"pause", "clear"}, garbage: [][]string{
		{"--transport", "Web Hook"},
	}},
	{name: "engagement-console", cmd: consolecmd.NewCommand, garbage: [][]string{
		{"--listen", "8080", "host:port"},
		{"--statement-timeout", "0s"},
		{"--csrf-key", "short", "32 characters"},
		{"--htpasswd", "/nonexistent/htpasswd"},
		{"--htpasswd", "ops:plaintext", "bcrypt"},
		// Open (no authentication) on every interface: refused.
		{"--listen", "0.0.0.0:8080", "without authentication"},
		{"--listen", ":8080", "without authentication"},
		{"--operators", "ops", "no authentication"},
		{"--trusted-proxy", "proxy.internal", "CIDR"},
		{"--tls-cert", "/nonexistent/cert.pem", "--tls-key"},
		{"--read-timeout", "0s"},
	}},
	{name: "engagementctl cleanup", cmd: ctl.NewCommand, args: []string{"cleanup"}, garbage: [][]string{
		{"--older-than", "0s"},
		{"--batch-size", "0"},
	}},
	{name: "engagementctl enqueue", cmd: ctl.NewCommand,
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
	name string
	cmd  func() *cobra.Command
	env  []string
	// connectTimeout, when positive, stands in for the connect timeout a
	// URL without connect_timeout gets (postgres.DefaultConnectTimeout in
	// the binary), so that the test need not wait out the default.
	connectTimeout time.Duration
	args           []string
	wantCode       int
	want           string        // stderr mentions this
	bound          time.Duration // > 0: the run ends within this long
	atLeast        time.Duration // > 0: and not before (it really waited)
}

type outcome struct {
	res  cmdtest.Result
	took time.Duration
}

// hangLimit is when a run is cancelled (the binary's SIGTERM): one that
// hangs is a failure, not a test timeout.
const hangLimit = 20 * time.Second

// run runs c's command in process to its end, or cancels it after hangLimit.
func run(c matrixCase) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	env := cli.Env{LookupEnv: cli.MapEnv(cmdtest.Env(c.env...)), ConnectTimeout: c.connectTimeout}
	start := time.Now()
	res := cmdtest.ExecWith(ctx, c.cmd, env, c.args...)
	return outcome{res, time.Since(start)}
}

func TestExitCodeMatrix(t *testing.T) {
	t.Parallel()
	if pw, _ := url.PathUnescape(passwordEncoded); pw != password {
		t.Fatalf("the test's password constants disagree: %q", pw)
	}
	const (
		connectTimeout = time.Second
		// The timeout a URL without connect_timeout gets here, in place of
		// postgres.DefaultConnectTimeout (10 s; TestParseConfigTimeoutsTLSAndPoolSize
		// checks that value): a different one from connectTimeout, so that
		// the run shows it used this one.
		defaultTimeout = 2 * time.Second
		// A loaded 2-core CI runner with the race detector: 2.5 s was
		// passed by 0.26 s (3.76 s for a 1 s timeout) while the other
		// packages' tests ran. Bounds stay well under the 10 s
		// postgres.DefaultConnectTimeout that an ignored timeout would take.
		margin = 5 * time.Second
	)
	hole := blackhole(t)
	closedPort := 1 // nothing listens on 127.0.0.1:1: connection refused

	var cases []matrixCase
	for _, inv := range invocations {
		newCmd := inv.cmd
		args := func(more ...string) []string { return append(append([]string(nil), inv.args...), more...) }
		// A garbage value is rejected before any work: were the URL
		// (a closed port) tried first, the exit would be 1.
		unreachable := "DATABASE_URL=" + databaseURL(closedPort, "connect_timeout=1")
		cases = append(cases,
			matrixCase{name: inv.name + "/no DATABASE_URL", cmd: newCmd, args: args(), wantCode: 2, want: "DATABASE_URL"},
			matrixCase{name: inv.name + "/blank DATABASE_URL", cmd: newCmd, env: []string{"DATABASE_URL=  "}, args: args(), wantCode: 2, want: "DATABASE_URL"},
			matrixCase{name: inv.name + "/unknown flag", cmd: newCmd, env: []string{unreachable}, args: args("--no-such-flag"), wantCode: 2, want: "unknown flag"},
			matrixCase{name: inv.name + "/connection refused", cmd: newCmd,
				env: []string{"DATABASE_URL=" + databaseURL(closedPort, "connect_timeout=1")}, args: args(),
				wantCode: 1, bound: connectTimeout + margin},
			matrixCase{name: inv.name + "/connection refused, URL as a flag", cmd: newCmd,
				args: args("--database-url", databaseURL(closedPort, "connect_timeout=1")), wantCode: 1, bound: connectTimeout + margin},
			matrixCase{name: inv.name + "/server never answers, connect_timeout=1", cmd: newCmd,
				env: []string{"DATABASE_URL=" + databaseURL(hole, "connect_timeout=1")}, args: args(),
				wantCode: 1, want: "connect", bound: connectTimeout + margin, atLeast: connectTimeout - 100*time.Millisecond},
			// Without connect_timeout in the URL, the default bounds it.
			matrixCase{name: inv.name + "/server never answers, default timeout", cmd: newCmd,
				env: []string{"DATABASE_URL=" + databaseURL(hole, "")}, args: args(), connectTimeout: defaultTimeout,
				wantCode: 1, want: "connect", bound: defaultTimeout + margin,
				atLeast: defaultTimeout - 100*time.Millisecond},
			matrixCase{name: inv.name + "/unparsable DATABASE_URL", cmd: newCmd,
				env: []string{"DATABASE_URL=" + databaseURL(closedPort, "connect_timeout=soon")}, args: args(),
				// A configuration error, found before any work.
				wantCode: 2, want: "invalid database URL"},
		)
		for _, g := range inv.garbage {
			want := g[0]
			if len(g) > 2 {
				want = g[2]
			}
			cases = append(cases, matrixCase{name: inv.name + "/" + g[0] + " " + g[1][:min(len(g[1]), 20)], cmd: newCmd,
				env: []string{unreachable}, args: args(g[:2]...), wantCode: 2, want: want})
		}
	}

	// Every run at once: many wait on a timeout.
	results := make([]outcome, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() { results[i] = run(c) })
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
			// Stderr is not a terminal, so the logs are JSON (LOG_FORMAT
			// json, or auto), and so is the error line of every command,
			// with a logger of its own or without (issue 31, item 7), and
			// with an unknown --log-format: one log line whose message
			// starts with the binary's name, with the exit code.
			var line struct {
				Level    string `json:"level"`
				Message  string `json:"message"`
				ExitCode int    `json:"exit_code"`
			}
			structured := len(lines) == 1 && json.Unmarshal([]byte(lines[0]), &line) == nil && line.Level == "error" &&
				strings.HasPrefix(line.Message, binName+": ") && line.ExitCode == res.Code
			if !structured {
				t.Errorf("stderr %q, want one JSON log line, level error, its message starting %q, with exit_code %d", res.Stderr, binName+": ", res.Code)
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

// noDatabase are the commands that never connect to PostgreSQL, so the
// matrix's database cases do not apply, each with why.
var noDatabase = map[string]string{
	"engagementctl check-receiver": "it probes the bot's webhook, not the database",
	"engagementctl prices import":  "it turns a rate card file into a prices file, without the database",
}

// Every command cobra knows, in every binary (each leaf of its tree), is in
// the matrix (or says why it needs no database): a new command cannot be
// forgotten.
func TestTheMatrixHasEveryCommand(t *testing.T) {
	t.Parallel()
	inMatrix := map[string]bool{}
	for _, inv := range invocations {
		inMatrix[inv.name] = true
	}
	var walk func(path string, c *cobra.Command)
	walk = func(path string, c *cobra.Command) {
		if c.Runnable() && !c.Hidden && !c.HasSubCommands() {
			if _, exempt := noDatabase[path]; !inMatrix[path] && !exempt {
				t.Errorf("%q is not in the exit-code matrix (invocations) nor in noDatabase", path)
			}
		}
		for _, sub := range c.Commands() {
			walk(path+" "+sub.Name(), sub)
		}
	}
	for _, newCmd := range []func() *cobra.Command{jobcmd.NewDailyCommand, jobcmd.NewWeeklyCommand, queuecmd.NewCommand,
		consolecmd.NewCommand, ctl.NewCommand} {
		root := newCmd()
		walk(root.Name(), root)
	}
}
