// Command engagement-daily moves inactive users through the engagement state
// machine: goodbyes after 14 silent days, dormant after 48 h unanswered or a
// due "remind me later". Run it once a day; re-running is always safe.
package main

import (
	"os"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
)

func main() {
	os.Exit(cli.Run(jobcmd.NewDailyCommand()))
}
