package exitcodes_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// failingRun is one run of one binary that fails: the command line, the
// binary's package and command, and the exit code it must end with.
type failingRun struct {
	name     string
	pkg      string // the binary's main package, for cmdtest.Build
	cmd      func() *cobra.Command
	args     []string
	wantCode int
}

// ctlArgs are the flags an engagementctl command needs to get as far as
// the database (or, for check-receiver, the webhook): without them it
// stops at a usage error. A command missing here that needs some fails
// the test with exit 2, naming itself.
var ctlArgs = map[string][]string{
	"engagementctl enqueue":          {"--user-id", userID, "--type", "weekly_review", "--jid", "5511999990000@s.whatsapp.net"},
	"engagementctl cancel":           {"--all"},
	"engagementctl opt-out":          {"--user-id", userID},
	"engagementctl opt-in":           {"--user-id", userID},
	"engagementctl erase":            {"--user-id", userID, "--yes"},
	"engagementctl categories set":   {"promo", "utility"},
	"engagementctl categories unset": {"promo"},
	"engagementctl pause clear":      {"--transport", "webhook"},
	"engagementctl seed":             {"--users", "1", "--as-of", "2026-01-05T06:00:00Z"},
	"engagementctl migrate force":    {"0"},
	"engagementctl check-receiver":   {"--webhook-url", "http://127.0.0.1:1/webhook", "--webhook-secret", "s3cr3t", "--timeout", "2s"},
	// A rate card it reads whole, and an output it cannot write.
	"engagementctl prices import": {"../../../pricing/testdata/ratecard-sample-usd.csv", "--effective", "2026-10-01",
		"--output", "/nonexistent/prices.json"},
}

// failingRuns is every binary, and every engagementctl command (found by
// walking the command tree, so a new one is covered), each run so that it
// fails at run time: the database (or the webhook) is a closed port on
// 127.0.0.1. The commands that only group others fail with their usage
// error (exit 2), and so do a flag cobra rejects and a value the command
// does.
func failingRuns() []failingRun {
	runs := []failingRun{
		{name: "engagement-daily", pkg: "./cmd/engagement-daily", cmd: jobcmd.NewDailyCommand, wantCode: 1},
		{name: "engagement-weekly", pkg: "./cmd/engagement-weekly", cmd: jobcmd.NewWeeklyCommand, wantCode: 1},
		{name: "queue-process", pkg: "./cmd/queue-process", cmd: queuecmd.NewCommand, args: []string{"--transport", "log"}, wantCode: 1},
		{name: "queue-process --no-such-flag", pkg: "./cmd/queue-process", cmd: queuecmd.NewCommand, args: []string{"--no-such-flag"}, wantCode: 2},
		{name: "engagementctl --no-such-flag", pkg: "./cmd/engagementctl", cmd: ctl.NewCommand, args: []string{"--no-such-flag"}, wantCode: 2},
		{name: "engagementctl no-such-command", pkg: "./cmd/engagementctl", cmd: ctl.NewCommand, args: []string{"no-such-command"}, wantCode: 2},
		{name: "engagementctl status --output xml", pkg: "./cmd/engagementctl", cmd: ctl.NewCommand, args: []string{"status", "--output", "xml"}, wantCode: 2},
	}
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		name := strings.Join(append([]string{"engagementctl"}, path...), " ")
		code := 1
		if c.HasSubCommands() {
			code = 2 // "needs a command: one of …"
		}
		args := append(append([]string(nil), path...), ctlArgs[name]...)
		runs = append(runs, failingRun{name: name, pkg: "./cmd/engagementctl", cmd: ctl.NewCommand, args: args, wantCode: code})
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(ctl.NewCommand(), nil)
	return runs
}

// Issue 31, item 7: with stderr not a terminal the logs are JSON, and so
// must be every line on stderr: status, verify and cleanup printed their
// fatal error as plain text while enqueue printed a JSON line. Every
// binary and every engagementctl command, failing, as a built process
// (so that nothing a library writes to the process's stderr escapes) and
// in process (cli.Main, as the other tests run them); with LOG_FORMAT
// unset (auto: stderr is a pipe) and set to json.
func TestEveryStderrLineIsAJSONLogLine(t *testing.T) {
	t.Parallel()
	unreachable := "DATABASE_URL=" + databaseURL(1, "connect_timeout=1") // nothing listens on 127.0.0.1:1
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), unreachable}
	formats := []struct {
		name string
		env  []string
	}{
		{"LOG_FORMAT unset", base},
		{"LOG_FORMAT=json", append(append([]string(nil), base...), "LOG_FORMAT=json")},
	}
	for _, r := range failingRuns() {
		for _, f := range formats {
			t.Run(r.name+"/"+f.name+"/built", func(t *testing.T) {
				t.Parallel()
				bin := cmdtest.Build(t, r.pkg)
				res := runBinary(t, bin, f.env, r.args...)
				checkJSONLines(t, filepath.Base(bin), r.wantCode, res)
			})
			t.Run(r.name+"/"+f.name+"/in process", func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
				defer cancel()
				res := cmdtest.ExecWith(ctx, r.cmd, cli.Env{LookupEnv: cli.MapEnv(f.env)}, r.args...)
				checkJSONLines(t, r.cmd().Name(), r.wantCode, res)
			})
		}
	}
}

// runBinary runs bin with env and args, killing it after hangLimit.
func runBinary(t *testing.T, bin string, env []string, args ...string) cmdtest.Result {
	t.Helper()
	cmd, stdout, stderr := cmdtest.Command(bin, env, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(hangLimit, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	_ = cmd.Wait() // the exit code is what is checked
	return cmdtest.Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
}

// checkJSONLines checks that res ended with wantCode and that every line
// of its stderr is a JSON log line (an object with a level), the last one
// the error: "level":"error", its exit_code, a message naming the binary.
func checkJSONLines(t *testing.T, bin string, wantCode int, res cmdtest.Result) {
	t.Helper()
	if res.Code != wantCode {
		t.Errorf("exit %d, want %d; stderr: %s", res.Code, wantCode, res.Stderr)
	}
	lines := cmdtest.Lines(res.Stderr)
	if len(lines) == 0 {
		t.Fatalf("nothing on stderr, want the error as a JSON log line")
	}
	type logLine struct {
		Level    string `json:"level"`
		Message  string `json:"message"`
		ExitCode *int   `json:"exit_code"`
	}
	for i, l := range lines {
		var line logLine
		if err := json.Unmarshal([]byte(l), &line); err != nil || line.Level == "" {
			t.Errorf("stderr line %d is not a JSON log line: %s", i+1, l)
		}
	}
	var last logLine
	if json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil {
		return // reported above
	}
	if last.Level != "error" || last.ExitCode == nil || *last.ExitCode != res.Code || !strings.HasPrefix(last.Message, bin+": ") {
		t.Errorf("the last stderr line %s; want \"level\":\"error\", \"exit_code\":%d and a message starting %q",
			lines[len(lines)-1], res.Code, bin+": ")
	}
}

// LOG_FORMAT=console (what auto picks on a terminal) keeps the error the
// plain line "<binary>: <error>", for every command alike: the commands
// without --log-format read LOG_FORMAT as those with it do.
func TestConsoleLogsKeepThePlainErrorLine(t *testing.T) {
	t.Parallel()
	env := []string{"LOG_FORMAT=console", "DATABASE_URL=" + databaseURL(1, "connect_timeout=1")}
	for _, r := range failingRuns() {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
			defer cancel()
			res := cmdtest.ExecWith(ctx, r.cmd, cli.Env{LookupEnv: cli.MapEnv(env)}, r.args...)
			bin := r.cmd().Name()
			lines := cmdtest.Lines(res.Stderr)
			if res.Code != r.wantCode || len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], bin+": ") {
				t.Errorf("exit %d, stderr %q; want exit %d, the last line plain, starting %q", res.Code, res.Stderr, r.wantCode, bin+": ")
			}
		})
	}
}
