// Command stop stops what the tests and the demo started and left running
// (`make services-stop`):
//
//   - pgtest's throwaway PostgreSQL cluster (/dev/shm/engagement-pgtest or
//     $TMPDIR/engagement-pgtest, as
//     `go run ./internal/testkit/pgtest/devdb --stop` does);
//   - redistest's throwaway redis-server ($TMPDIR/engagement-redistest);
//   - the PostgreSQL clusters and PgBouncers tests start for themselves,
//     when their test process ended without stopping them (killed, timed
//     out); those of tests still running are left alone.
//
// The Pushgateways of pushtest need nothing: they die with their test
// process. Servers found running rather than started by the tests (the
// DATABASE_URL server, a Redis on 6379, system services) are never
// touched. It prints a line for what it stopped; errors exit 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/redistest"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var errs []error
	if line, err := pgtest.StopThrowaway(); err != nil {
		errs = append(errs, fmt.Errorf("stop the throwaway PostgreSQL: %w", err))
	} else if line != "" {
		fmt.Println(line)
	}
	if stopped, err := redistest.StopThrowaway(); err != nil {
		errs = append(errs, err)
	} else if stopped {
		fmt.Println("stopped the throwaway redis-server")
	}
	done, err := pgtest.StopLeftovers(ctx)
	for _, line := range done {
		fmt.Println(line)
	}
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " | ")), " ")
		fmt.Fprintln(os.Stderr, "services-stop: "+msg)
		os.Exit(1)
	}
}
