// Package cli holds what the engagement binaries share: the cobra commands,
// flags with environment fallbacks, logging, and the mapping of errors to the
// documented exit codes.
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

// usageError marks err as a usage or configuration error (exit 2).
func usageError(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// usagef formats a usage error.
func usagef(format string, args ...any) error { return usageError(fmt.Errorf(format, args...)) }

// errPartial is returned after the summary was written when --fail-on-partial
// is set and something failed.
var errPartial = &ExitError{Code: ExitPartial, Err: errors.New("completed with failures (--fail-on-partial)")}

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
// env.Stderr, in the format of the command's logs (a JSON log line when
// they are JSON), and, with --output json, as the run's one JSON object on
// stdout when the command had printed none: {"job","error","exit_code"}.
// A panic is an internal error: exit 1, with its stack in the log, never
// a bare Go trace. Run calls it with the process's; tests call it to run a
// command in process.
func Main(ctx context.Context, cmd *cobra.Command, args []string, env Env) (code int) {
	env = env.withDefaults()
	// Logs come from several goroutines at once. An *os.File takes
	// concurrent writes; any other writer (a test's buffer) gets a lock.
	if _, ok := env.Stderr.(*os.File); !ok {
		env.Stderr = zerolog.SyncWriter(env.Stderr)
	}
	stderr := env.Stderr
	stdout := &countingWriter{w: env.Stdout}
	ran := cmd
	defer func() {
		if r := recover(); r != nil {
			code = ExitFatal
			finish(ran, stdout, stderr, fmt.Sprintf("internal error: %v", r), code, debug.Stack())
		}
	}()
	cmd.SetArgs(args)
	// --version on every binary: "queue-process v1.4.0", exit 0.
	cmd.Version = version()
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	// The environment reaches the command through its flags only: each
	// flag not given on the command line takes its variable, here, before
	// the command runs.
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error { return applyEnv(c, env.LookupEnv) }
	ctx = postgres.WithConnectTimeout(ctx, env.ConnectTimeout)
	// Commands without a logger of their own (status, verify, …) still
	// log what must not go unseen, like a server WARNING, as JSON lines.
	ctx = zerolog.New(stderr).With().Timestamp().Str("app", cmd.Name()).Logger().WithContext(ctx)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	c, err := cmd.ExecuteContextC(ctx)
	if c != nil {
		ran = c
	}
	if err == nil {
		return ExitOK
	}
	// The edge every error passes: no secret of the command's leaves in it.
	err = secretsOf(ran).scrub(err)
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
	if exit != errPartial {
		finish(ran, stdout, stderr, oneLine(err.Error()), code, stack)
	}
	return code
}

// finish reports the error msg a run of cmd ends with, exit code code: one
// line on stderr, a JSON log line when the command logs JSON (with stack,
// when given); and, with --output json, the run's JSON object on stdout
// unless the command wrote one.
func finish(cmd *cobra.Command, stdout *countingWriter, stderr io.Writer, msg string, code int, stack []byte) {
	name := cmd.Root().Name()
	if jsonLogs(cmd, stderr) {
		log := zerolog.New(stderr).With().Timestamp().Str("app", cmd.Root().Name()).Int("exit_code", code).Logger()
		e := log.Error()
		if stack != nil {
			e = e.Str("stack", string(stack))
		}
		e.Msg(name + ": " + msg)
	} else {
		fmt.Fprintf(stderr, "%s: %s\n", name, msg)
		if stack != nil {
			stderr.Write(stack) //nolint:errcheck // best effort, on the way out
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

// jsonLogs reports whether cmd logs JSON to stderr: --log-format (or
// LOG_FORMAT, which the run applied to the flag) json, or auto when stderr
// is not a terminal.
func jsonLogs(cmd *cobra.Command, stderr io.Writer) bool {
	f := cmd.Flags().Lookup("log-format")
	if f == nil {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(f.Value.String())) {
	case "json":
		return true
	case "auto", "":
		file, ok := stderr.(*os.File)
		return !ok || !term.IsTerminal(int(file.Fd()))
	}
	return false
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

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
