package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/earlystop"
)

// Run runs cmd as the process: with the process's arguments, environment
// and standard streams (ProcessEnv), and a context cancelled by SIGINT or
// SIGTERM. It returns the exit code for main to pass to os.Exit. Being the
// process's one run, its logger is also the libraries' (libraryLog).
//
// A signal that arrived before this handler existed, while the program's
// packages were being initialized (earlystop catches those), stops the
// run as one arriving now would.
func Run(cmd *cobra.Command) int {
	ctx, cancel := context.WithCancel(withProcessRun(context.Background()))
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if earlystop.Caught() {
		cancel()
	}
	return Main(ctx, cmd, os.Args[1:], ProcessEnv())
}
