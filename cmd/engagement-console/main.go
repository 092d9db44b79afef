// Command engagement-console serves the operators' web console over the
// scheduler's database: the engagement funnel, the queue's health, the job
// runs, the invariants, a user's timeline, the coming week's forecast, and
// the audited requeue and cancel actions, with authentication built in.
package main

import (
	"os"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/consolecmd"
)

func main() {
	os.Exit(cli.Run(consolecmd.NewCommand()))
}
