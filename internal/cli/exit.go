// Package cli holds what the engagement binaries share: the cobra commands,
// flags with environment fallbacks, logging, and the mapping of errors to the
// documented exit codes.
package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/postgres"
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
// stderr) and returns the process exit code, writing any error as one line
// to env.Stderr. It never lets a panic escape as a stack trace. Run calls it
// with the process's; tests call it to run a command in process.
func Main(ctx context.Context, cmd *cobra.Command, args []string, env Env) (code int) {
	env = env.withDefaults()
	stderr := env.Stderr
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "%s: internal error: %v\n", cmd.Name(), r)
			code = ExitFatal
		}
	}()
	cmd.SetArgs(args)
	cmd.SetOut(env.Stdout)
	cmd.SetErr(stderr)
	ctx = postgres.WithConnectTimeout(withEnv(ctx, env), env.ConnectTimeout)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code = ExitUsage // cobra's own errors: unknown flag, command or argument
	var exit *ExitError
	if errors.As(err, &exit) {
		code = exit.Code
	}
	if exit != errPartial {
		fmt.Fprintf(stderr, "%s: %s\n", cmd.Name(), oneLine(err.Error()))
	}
	return code
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
