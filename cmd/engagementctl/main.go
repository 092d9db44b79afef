// Command engagementctl is the engagement scheduler's operator tool: schema
// migrations and the operational commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/engagement-scheduler/engagement/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, cli.NewCtlCommand(), os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
