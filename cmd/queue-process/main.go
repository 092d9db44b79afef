// Command queue-process delivers due queued messages through a transport
// (the bot's webhook, the WhatsApp Cloud API, or a log), with retries,
// exponential backoff and a pace shared by every running process.
package main

import (
	"os"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
)

func main() {
	os.Exit(cli.Run(queuecmd.NewCommand()))
}
