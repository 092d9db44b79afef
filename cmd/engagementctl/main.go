// Command engagementctl is the engagement scheduler's operator tool: schema
// migrations and the operational commands.
package main

import (
	"os"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
)

func main() {
	os.Exit(cli.Run(ctl.NewCommand()))
}
