package queuecmd

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// transports is every transport queue-process (and the jobs' queue step)
// can deliver through, in the order --help lists them. Each kind declares
// its --transport name, its help and its own flags beside the transport,
// in sender/transport; a new transport is its file there and its row here
// (docs/development.md, "Adding a transport"). The delivery flags, the
// --transport help, queue-process's help text and the errors naming the
// transports all follow from this list.
var transports = []transport.Kind{
	transport.WebhookKind,
	transport.WhatsAppCloudKind,
	transport.LogKind,
}

// transportNames lists the transports for help and errors: "webhook,
// whatsapp-cloud or log".
func transportNames() string {
	names := make([]string, len(transports))
	for i, t := range transports {
		names[i] = t.Name
	}
	if len(names) == 1 {
		return names[0]
	}
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " or " + names[last]
}

// transportList is the transports for a help text: one indented line each,
// its name and its help, aligned.
func transportList() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, t := range transports {
		fmt.Fprintf(tw, "  %s\t%s\n", t.Name, t.Help)
	}
	_ = tw.Flush() // a strings.Builder does not fail
	return strings.TrimSuffix(b.String(), "\n")
}
