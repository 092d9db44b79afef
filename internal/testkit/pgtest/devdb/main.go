// Command devdb gives the Makefile's demo and bench targets a PostgreSQL
// server the way the tests get one (see package pgtest):
//
//	go run ./internal/testkit/pgtest/devdb                 # print the server URL
//	go run ./internal/testkit/pgtest/devdb --create NAME   # (re)create migrated database NAME, print its URL
//	go run ./internal/testkit/pgtest/devdb --stop          # stop pgtest's throwaway cluster, if running
//
// Only the URL goes to stdout; diagnostics go to stderr. Errors exit 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

func main() {
	create := flag.String("create", "", "create (after dropping) the migrated database `NAME` and print its URL")
	stop := flag.Bool("stop", false, "stop the throwaway cluster started by pgtest, if it is running")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %q", flag.Args()))
	}
	if *stop && *create != "" {
		fail(fmt.Errorf("--stop and --create are exclusive"))
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	var (
		out string
		err error
	)
	switch {
	case *stop:
		if out, err = pgtest.StopThrowaway(); err == nil && out == "" {
			out = "no throwaway PostgreSQL cluster was running"
		}
	case *create != "":
		out, err = pgtest.CreateDatabase(ctx, *create)
	default:
		out, err = pgtest.ServerURL(ctx)
	}
	if err != nil {
		fail(err)
	}
	if out != "" {
		fmt.Println(out)
	}
}

// fail prints err on one line and exits 1.
func fail(err error) {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " | ")), " ")
	fmt.Fprintln(os.Stderr, "devdb: "+msg)
	os.Exit(1)
}
