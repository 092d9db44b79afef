// Command engagement-weekly queues one celebratory weekly review for every
// user active in the last 7 days. Run it once a week; re-running the same
// ISO week queues nothing.
package main

import (
	"os"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
)

func main() {
	os.Exit(cli.Run(jobcmd.NewWeeklyCommand()))
}
