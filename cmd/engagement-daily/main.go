// Command engagement-daily moves inactive users through the engagement state
// machine: goodbyes after 14 silent days, dormant after 48 h unanswered or a
// due "remind me later". Run it once a day; re-running is always safe.
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
	code := cli.Main(ctx, cli.NewDailyCommand(), os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
