// Package cli holds what the engagement binaries share: Run and Main, the
// mapping of errors to the documented exit codes, flags with environment
// fallbacks, logging, secrets, the options runner and the metrics push.
// The commands are in packages of their own, so that each binary links
// only what it runs: queue-process and the delivery flags the jobs' queue
// step shares in internal/cli/queuecmd, the jobs in internal/cli/jobcmd,
// engagementctl in internal/cli/ctl, the console in internal/cli/consolecmd.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/recovered"
)

// Exit codes of every binary (the public contract).
const (
	ExitOK      = 0 // the run completed
	ExitFatal   = 1 // fatal at run time: database, schema, lock or I/O
	ExitUsage   = 2 // usage or configuration error found before any work
	ExitPartial = 3 // completed with failures, only with --fail-on-partial
	// ExitInvariant is engagementctl verify's: the checks ran and an
	// invariant is broken (the report says which). 1 stays "could not check".
	ExitInvariant = 4
)

// ExitError carries the exit code an error maps to.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// UsageError marks err as a usage or configuration error (exit 2).
func UsageError(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// Usagef formats a usage error.
func Usagef(format string, args ...any) error { return UsageError(fmt.Errorf(format, args...)) }

// ErrPartial is returned after the summary was written when --fail-on-partial
// is set and something failed.
var ErrPartial = &ExitError{Code: ExitPartial, Err: errors.New("completed with failures (--fail-on-partial)")}

// runE adapts a command's work so that its errors exit 1 unless they already
// carry a code. Everything cobra itself rejects (unknown flags, commands,
// arguments) never reaches runE and exits 2.
func runE(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		var exit *ExitError
		if err == nil || errors.As(err, &exit) {
			return err
		}
		return &ExitError{Code: ExitFatal, Err: err}
	}
}

// Main runs cmd with args in env (its environment variables, stdout and
// stderr) and returns the process exit code. Any error ends as one line on
// env.Stderr, in the format of the run's logs (logFormat: a JSON log line,
// with "level":"error" and exit_code, when they are JSON), for every
// command alike, and, with --output json, as the run's one JSON object on
// stdout when the command had printed none: {"job","error","exit_code"}.
// A panic is an internal error: exit 1, with its stack in the log, never
// a bare Go trace. Run calls it with the process's; tests call it to run a
// command in process.
func Main(ctx context.Context, cmd *cobra.Command, args []string, env Env) (code int) {
	env = env.withDefaults()
	routeLibraryLogs()
	// Logs come from several goroutines at once. An *os.File takes
	// concurrent writes; any other writer (a test's buffer) gets a lock.
	if _, ok := env.Stderr.(*os.File); !ok {
		env.Stderr = zerolog.SyncWriter(env.Stderr)
	}
	stdout := &countingWriter{w: env.Stdout}
	ran := cmd
	defer func() {
		if r := recover(); r != nil {
			code = ExitFatal
			finish(ran, env, stdout, fmt.Sprintf("internal error: %v", r), code, debug.Stack())
		}
	}()
	setUp(cmd, args, env, stdout)
	ctx = postgres.WithConnectTimeout(ctx, env.ConnectTimeout)
	ctx = runLogger(cmd, env).WithContext(ctx) // until the flags are read
	c, err := cmd.ExecuteContextC(ctx)
	if c != nil {
		ran = c
	}
	if err == nil {
		return ExitOK
	}
	// The edge every error passes: no secret of the command's leaves in it.
	err = SecretsOf(ran).Scrub(err)
	code = ExitUsage // cobra's own errors: unknown flag, command or argument
	var exit *ExitError
	if errors.As(err, &exit) {
		code = exit.Code
	}
	// A panic in one of the run's goroutines came back as an error (see
	// internal/recovered): exit 1 like any fatal error, with its stack.
	var stack []byte
	if pe := (*recovered.Error)(nil); errors.As(err, &pe) {
		code, stack = ExitFatal, pe.Stack
	}
	if exit != ErrPartial {
		finish(ran, env, stdout, OneLine(err.Error()), code, stack)
	}
	return code
}

// setUp readies cmd to run with args in env, writing to stdout: it gives
// it --version, has it read the environment and put the run's logger in
// its context before it runs, and silences cobra's own printing of errors
// and usage (Main prints errors its own way).
func setUp(cmd *cobra.Command, args []string, env Env, stdout io.Writer) {
	cmd.SetArgs(args)
	// --version on every binary: "queue-process v1.4.0", exit 0.
	cmd.Version = version()
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	cmd.SetOut(stdout)
	cmd.SetErr(env.Stderr)
	// The environment reaches the command through its flags only: each
	// flag not given on the command line takes its variable, here, before
	// the command runs. Then the run's logger, in the run's log format, goes
	// into its context: commands without a logger of their own (status,
	// verify, …) log what must not go unseen with it, like a server
	// WARNING, and the libraries' own loggers write through it.
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		err := applyEnv(c, env.LookupEnv)
		log := runLogger(c, env)
		c.SetContext(log.WithContext(c.Context()))
		if isProcessRun(c.Context()) {
			libraryLog.Store(&log)
		}
		return err
	}
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
}

// finish reports the error msg a run of cmd ends with, exit code code: one
// line on env.Stderr, a JSON log line when the run's logs are JSON (with
// stack, when given), whatever the command; and, with --output json, the
// run's JSON object on stdout unless the command wrote one. It is the one
// place a run's error is written.
func finish(cmd *cobra.Command, env Env, stdout *countingWriter, msg string, code int, stack []byte) {
	name := cmd.Root().Name()
	if logFormat(cmd, env) == "json" {
		log := runLogger(cmd, env).Level(zerolog.TraceLevel) // whatever the level
		e := log.Error().Int("exit_code", code)
		if stack != nil {
			e = e.Str("stack", string(stack))
		}
		e.Msg(name + ": " + msg)
	} else {
		fmt.Fprintf(env.Stderr, "%s: %s\n", name, msg)
		if stack != nil {
			env.Stderr.Write(stack) //nolint:errcheck // best effort, on the way out
		}
	}
	if f := cmd.Flags().Lookup("output"); f != nil && f.Value.String() == "json" && stdout.n == 0 {
		_ = json.NewEncoder(stdout).Encode(struct {
			Job      string `json:"job"`
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}{cmd.Root().Name(), msg, code})
	}
}

// logFormat is the format of a run of cmd's logs on env.Stderr, and so of
// its error line: "json" or "console". Every command has it, with the
// flag --log-format or without (a command without a logger of its own
// still logs, with runLogger, and still ends with an error line): the
// flag's value when given on the command line, else LOG_FORMAT, else the
// flag's default, auto. auto, and anything else (a value the command
// rejects, a usage error written in this format), is json unless stderr is
// a terminal.
func logFormat(cmd *cobra.Command, env Env) string {
	switch format := strings.ToLower(strings.TrimSpace(logSetting(cmd, env, "log-format", logFormatEnv))); format {
	case "json", "console":
		return format
	}
	if file, ok := env.Stderr.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		return "console"
	}
	return "json"
}

// logLevel is the level of a run of cmd's logs, as logFormat its format:
// --log-level, else LOG_LEVEL, else the flag's default; info when none
// is given or the value is not a level (the command rejects it where it
// has the flag).
func logLevel(cmd *cobra.Command, env Env) zerolog.Level {
	level, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(logSetting(cmd, env, "log-level", logLevelEnv))))
	if err != nil || level == zerolog.NoLevel {
		return zerolog.InfoLevel
	}
	return level
}

// logSetting is the value of cmd's flag when given on the command line,
// else the variable's when set, else the flag's default ("" without the
// flag). It holds before the flags are parsed, and after a parse that
// failed, as after Main applied the environment to them.
func logSetting(cmd *cobra.Command, env Env, flag, variable string) string {
	f := cmd.Flags().Lookup(flag)
	if f != nil && f.Changed {
		return f.Value.String()
	}
	if v, ok := env.LookupEnv(variable); ok && strings.TrimSpace(v) != "" {
		return v
	}
	if f != nil {
		return f.DefValue
	}
	return ""
}

// runLogger is the logger of a run of cmd for what has no logger of its
// own: the commands that log only what must not go unseen (status,
// verify, …), the libraries' loggers (libraryLog), the error line. It
// writes to env.Stderr in the run's format, at its level, as "app" the
// binary's name.
func runLogger(cmd *cobra.Command, env Env) zerolog.Logger {
	w := env.Stderr
	if logFormat(cmd, env) == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(logLevel(cmd, env)).With().Timestamp().Str("app", cmd.Root().Name()).Logger()
}

// countingWriter counts what a command wrote to stdout.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
