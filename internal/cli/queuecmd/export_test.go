package queuecmd

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// The package's own for its external tests (package queuecmd_test), which
// build the jobs' commands too: internal/cli/jobcmd imports this package,
// so those tests cannot be in it.

const DeliveryGroup = deliveryGroup

// NewCommandRunF is queue-process with runF in place of the run; it hands
// runF the processor's configuration the flags built.
func NewCommandRunF(runF func(transport.Transport) error) *cobra.Command {
	return newCommand(func(o *queueOptions) error { return runF(o.cfg.Transport) })
}

// TransportKind and TransportConfig are a transport's kind and
// configuration, for a test's own transport.
type (
	TransportKind   = transportKind
	TransportConfig = transportConfig
)

// WithTransport adds kind to transports for the test: its one row. The
// test must not be parallel (transports is read by every command built).
func WithTransport(t *testing.T, kind TransportKind) {
	t.Helper()
	saved := transports
	transports = append(slices.Clip(saved), kind)
	t.Cleanup(func() { transports = saved })
}
