package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Run runs cmd as the process: with the process's arguments, environment
// and standard streams (ProcessEnv), and a context cancelled by SIGINT or
// SIGTERM. It returns the exit code for main to pass to os.Exit. Being the
// process's one run, its logger is also the libraries' (libraryLog).
func Run(cmd *cobra.Command) int {
	ctx, stop := signal.NotifyContext(withProcessRun(context.Background()), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Main(ctx, cmd, os.Args[1:], ProcessEnv())
}
