// Package earlystop catches SIGINT and SIGTERM from the first moments of a
// binary's life, before the command's own handler exists.
//
// Go initializes a program's packages before main runs, and a SIGTERM that
// arrives then finds no handler: the process dies with 143, no summary
// written (issue 42: a cron platform's stop in queue-process's first
// second). This package has no imports but the standard library's signal
// handling, so it is initialized among the first; its init starts catching
// the two signals, and cli.Run asks Caught once its own handler is in
// place. Importing it is enough; cli does.
//
// Its own init comes after os and os/signal's: package first, which it
// imports, has the runtime queue the signals from before them (issue 55),
// and this package's channel receives what was queued meanwhile.
package earlystop

import (
	_ "github.com/engagement-scheduler/engagement/internal/earlystop/first" // the runtime queues SIGINT and SIGTERM from the first package on
	"os"
	"os/signal"
	"syscall"
)

var caught = make(chan os.Signal, 1)

func init() { signal.Notify(caught, os.Interrupt, syscall.SIGTERM) }

// Caught reports whether SIGINT or SIGTERM arrived before it was called,
// and stops catching: from then on the caller's handler has them.
func Caught() bool {
	signal.Stop(caught)
	select {
	case <-caught:
		return true
	default:
		return false
	}
}
