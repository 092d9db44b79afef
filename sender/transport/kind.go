package transport

import (
	"io"

	"github.com/spf13/pflag"
)

// Kind is one way queue-process (and the jobs' queue step) can deliver, as
// the binaries offer it: the --transport value that picks it, a few words
// for --help, and its own flags. Each transport's file declares its Kind
// beside the transport (WebhookKind, WhatsAppCloudKind, LogKind); the
// binaries list the kinds they offer in one table (internal/cli/queuecmd,
// transports.go), and --help, the reference and the errors naming the
// transports follow from it.
type Kind struct {
	// Name is the --transport value that picks the kind, e.g. "webhook".
	Name string
	// Help says in a few words what the kind delivers to, for the list of
	// transports in --help, e.g. "the running bot".
	Help string
	// Flags declares the kind's own flags on fs, each with its environment
	// variable (cliflag.BindEnv) and marked when it holds a secret
	// (cliflag.MarkSecret), and returns the configuration they fill:
	// complete once the command line and the environment are read. Every
	// kind's flags are declared, whichever --transport is given; only the
	// chosen kind's configuration is read.
	Flags func(fs *pflag.FlagSet) Config
}

// Config is a kind's configuration, as its flags filled it.
type Config interface {
	// Missing names the flags the transport cannot do without and that
	// were not given, as "--transport <name> needs ..." completes it;
	// "" when none is missing.
	Missing() string
	// Build makes the transport. stderr is the command's, for a transport
	// that writes there (the log). Its error is a configuration error,
	// found before any work; it never contains a secret.
	Build(stderr io.Writer) (Transport, error)
}

// UnknownRetrier is a Config that may ask for a send whose outcome is
// unknown to be retried rather than failed
// (delivery.ProcessorConfig.RetryUnknown), on a transport that cannot
// de-duplicate. A Config that does not implement it never asks.
type UnknownRetrier interface {
	RetryUnknown() bool
}
