package cmdtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
)

// echoCommand prints its arguments on stdout and a line on stderr, fails
// with "fail", and with "wait" waits for its context to end.
func echoCommand() *cobra.Command {
	return &cobra.Command{
		Use:  "echo",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && args[0] == "wait" {
				<-cmd.Context().Done()
				return &cli.ExitError{Code: cli.ExitFatal, Err: errors.New("stopped")}
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(args, " "))
			fmt.Fprintln(cmd.ErrOrStderr(), "a log line")
			if len(args) == 1 && args[0] == "fail" {
				return &cli.ExitError{Code: cli.ExitFatal, Err: errors.New("failed")}
			}
			return nil
		},
	}
}

// TestExecRunsTheCommandInProcess: Exec captures stdout and stderr apart
// and returns the exit code cli.Main maps the outcome to; the command sees
// only the environment it is handed, never the test process's.
func TestExecRunsTheCommandInProcess(t *testing.T) {
	if res := Exec(t, echoCommand, Env(), "hi"); res.Code != 0 || res.Stdout != "hi\n" || res.Stderr != "a log line\n" {
		t.Errorf("Exec: %+v, want exit 0, stdout %q, stderr %q", res, "hi\n", "a log line\n")
	}
	res := Exec(t, echoCommand, Env(), "fail")
	if lines := Lines(res.Stderr); res.Code != 1 || len(lines) != 2 || Message(lines[1]) != "echo: failed" {
		t.Errorf("Exec of a failing command: %+v, want exit 1 and the error as the last stderr line", res)
	}
	if res := Exec(t, echoCommand, Env(), "--no-such-flag"); res.Code != 2 {
		t.Errorf("Exec with an unknown flag: exit %d, want 2", res.Code)
	}

	t.Setenv("DATABASE_URL", "postgres://x@127.0.0.1:1/db?connect_timeout=1") // must not leak in
	if res := Exec(t, jobcmd.NewDailyCommand, Env()); res.Code != 2 || !strings.Contains(res.Stderr, "DATABASE_URL") {
		t.Errorf("engagement-daily without DATABASE_URL in its Env: %+v, want exit 2 naming DATABASE_URL", res)
	}
}

// TestStartAndStop: Start runs the command in the background; Stop cancels
// its context, as SIGTERM does the binary's.
func TestStartAndStop(t *testing.T) {
	r := Start(echoCommand, Env(), "wait")
	select {
	case <-r.Done():
		t.Fatal("the command returned before it was stopped")
	default:
	}
	if res := r.Stop(); res.Code != 1 || len(Lines(res.Stderr)) != 1 || Message(res.Stderr) != "echo: stopped" {
		t.Errorf("Stop: %+v, want exit 1 with the command's error", res)
	}
	if res := Start(echoCommand, Env(), "x").Wait(); res.Code != 0 || res.Stdout != "x\n" {
		t.Errorf("Wait: %+v, want exit 0 and stdout x", res)
	}
}
