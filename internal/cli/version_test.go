package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// Every binary answers --version with its name and the version set at
// build time ("dev" for a plain go build), and exits 0 without touching a
// database.
func TestEveryBinaryPrintsItsVersion(t *testing.T) {
	for name, newCmd := range map[string]func() *cobra.Command{
		"engagement-daily":  jobcmd.NewDailyCommand,
		"engagement-weekly": jobcmd.NewWeeklyCommand,
		"queue-process":     queuecmd.NewCommand,
		"engagementctl":     ctl.NewCommand,
	} {
		res := cmdtest.Exec(t, newCmd, nil, "--version")
		if res.Code != 0 || strings.TrimSpace(res.Stdout) != name+" dev" {
			t.Errorf("%s --version: exit %d, stdout %q, stderr %q; want 0 and %q", name, res.Code, res.Stdout, res.Stderr, name+" dev")
		}
	}
	old := cli.Version
	cli.Version = "v1.4.0"
	defer func() { cli.Version = old }()
	if res := cmdtest.Exec(t, queuecmd.NewCommand, nil, "--version"); strings.TrimSpace(res.Stdout) != "queue-process v1.4.0" {
		t.Errorf("with the build's version: stdout %q, want %q", res.Stdout, "queue-process v1.4.0")
	}
}

// Issue 24: with JSON logs a fatal error was a plain-text line, and
// --output json printed nothing for a failed run although the README
// promises exactly one object. Now the error is a JSON log line (level
// error, exit_code) and stdout holds one object with the error and the
// exit code.
func TestAFailedRunEndsInJSONWhenAskedFor(t *testing.T) {
	t.Parallel()
	env := cmdtest.Env("DATABASE_URL=postgres://nobody@127.0.0.1:1/none?connect_timeout=1", "LOG_FORMAT=json")
	for _, tc := range []struct {
		name    string
		newCmd  func() *cobra.Command
		args    []string
		wantErr string
		code    int
	}{
		{"database unreachable", queuecmd.NewCommand, []string{"--transport", "log", "--output", "json"}, "127.0.0.1", 1},
		{"usage error", jobcmd.NewDailyCommand, []string{"--as-of", "yesterday", "--output", "json"}, "--as-of", 2},
	} {
		res := cmdtest.Exec(t, tc.newCmd, env, tc.args...)
		var sum struct {
			Job      string `json:"job"`
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}
		lines := cmdtest.Lines(res.Stdout)
		if res.Code != tc.code || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &sum) != nil ||
			sum.ExitCode != tc.code || !strings.Contains(sum.Error, tc.wantErr) || sum.Job == "" {
			t.Errorf("%s: exit %d, stdout %q; want exit %d and one JSON object with the error and exit_code", tc.name, res.Code, res.Stdout, tc.code)
		}
		errLines := cmdtest.Lines(res.Stderr)
		var last struct {
			Level    string `json:"level"`
			ExitCode int    `json:"exit_code"`
			Message  string `json:"message"`
		}
		if len(errLines) == 0 || json.Unmarshal([]byte(errLines[len(errLines)-1]), &last) != nil ||
			last.Level != "error" || last.ExitCode != tc.code || !strings.Contains(last.Message, tc.wantErr) {
			t.Errorf("%s: stderr %q; want its last line a JSON error log line with exit_code %d", tc.name, res.Stderr, tc.code)
		}
	}
}
