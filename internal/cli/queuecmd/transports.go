package queuecmd

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// transports is every transport queue-process (and the jobs' queue step)
// can deliver through, in the order --help lists them. A new transport is
// its file in sender/transport (the transport, its configuration and the
// constructor that validates it: a library that knows no flag) and its
// kind and row here (docs/development.md, "Adding a transport"). The
// delivery flags, the --transport help, queue-process's help text and the
// errors naming the transports all follow from this list.
var transports = []transportKind{
	webhookKind,
	whatsAppCloudKind,
	logKind,
}

// transportKind is one way queue-process (and the jobs' queue step) can
// deliver, as the binaries offer it: the --transport value that picks it,
// a few words for --help, and its own flags.
type transportKind struct {
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
	Flags func(fs *pflag.FlagSet) transportConfig
}

// transportConfig is a kind's configuration, as its flags filled it.
type transportConfig interface {
	// Missing names the flags the transport cannot do without and that
	// were not given, as "--transport <name> needs ..." completes it;
	// "" when none is missing.
	Missing() string
	// Build makes the transport. stderr is the command's, for a transport
	// that writes there (the log). Its error is a configuration error,
	// found before any work; it never contains a secret.
	Build(stderr io.Writer) (transport.Transport, error)
}

// unknownRetrier is a transportConfig that may ask for a send whose
// outcome is unknown to be retried rather than failed
// (delivery.ProcessorConfig.RetryUnknown), on a transport that cannot
// de-duplicate. A configuration that does not implement it never asks.
type unknownRetrier interface {
	RetryUnknown() bool
}

// stringFlag declares a kind's string flag name, falling back to the
// environment variable env.
func stringFlag(fs *pflag.FlagSet, p *string, name, env, usage string) {
	fs.StringVar(p, name, "", usage)
	cliflag.BindEnv(fs, name, env)
}

// webhookKind is --transport webhook, with --webhook-url (required) and
// --webhook-secret.
var webhookKind = transportKind{
	Name: "webhook",
	Help: "the running bot",
	Flags: func(fs *pflag.FlagSet) transportConfig {
		c := &webhookFlags{}
		stringFlag(fs, &c.URL, "webhook-url", "ENGAGEMENT_WEBHOOK_URL", "the bot's endpoint, for --transport webhook")
		stringFlag(fs, &c.Secret, "webhook-secret", "ENGAGEMENT_WEBHOOK_SECRET", "HMAC-SHA256 key signing webhook bodies")
		cliflag.MarkSecret(fs, "webhook-secret")
		return c
	},
}

// webhookFlags is the webhook's configuration as its flags fill it.
type webhookFlags transport.WebhookConfig

func (c *webhookFlags) Missing() string {
	if c.URL == "" {
		return "--webhook-url (or ENGAGEMENT_WEBHOOK_URL)"
	}
	return ""
}

func (c *webhookFlags) Build(io.Writer) (transport.Transport, error) {
	return transport.NewWebhook(transport.WebhookConfig(*c))
}

// whatsAppCloudKind is --transport whatsapp-cloud, with
// --whatsapp-phone-number-id, --whatsapp-token and --whatsapp-templates
// (required), --whatsapp-business-account-id, --whatsapp-base-url,
// --whatsapp-retry-unknown, --whatsapp-throughput and
// --whatsapp-coexistence.
//
// The transport calls itself "whatsapp" (its Name), the name its ledger
// rows and its shared pace are stored under: renaming it would split the
// pace of a rolling deploy in two and orphan the ledger rows of sends in
// flight.
var whatsAppCloudKind = transportKind{
	Name: "whatsapp-cloud",
	Help: "Meta's Cloud API, template messages",
	Flags: func(fs *pflag.FlagSet) transportConfig {
		c := &whatsAppFlags{}
		stringFlag(fs, &c.phoneID, "whatsapp-phone-number-id", "WHATSAPP_PHONE_NUMBER_ID", "Cloud API phone number id, for --transport whatsapp-cloud")
		stringFlag(fs, &c.token, "whatsapp-token", "WHATSAPP_ACCESS_TOKEN", "Cloud API access token")
		cliflag.MarkSecret(fs, "whatsapp-token")
		stringFlag(fs, &c.templates, "whatsapp-templates", "WHATSAPP_TEMPLATES", "JSON file mapping message keys to approved templates")
		stringFlag(fs, &c.accountID, "whatsapp-business-account-id", "WHATSAPP_BUSINESS_ACCOUNT_ID", "WhatsApp Business Account id: read the templates' latest categories from Meta's Message Templates API at each run")
		stringFlag(fs, &c.baseURL, "whatsapp-base-url", "WHATSAPP_BASE_URL", "Cloud API base URL (default Meta's)")
		fs.BoolVar(&c.retryUnknown, "whatsapp-retry-unknown", false, "retry a Cloud API send whose outcome is unknown (a 5xx, a timeout) instead of failing it: the message may arrive twice")
		fs.IntVar(&c.throughput, "whatsapp-throughput", 0, "most messages per second to send through the number, across the run's workers (1-1000; default: Meta's level for the number, read at start: 80, 1000 when upgraded, 20 on the Business app)")
		cliflag.BindEnv(fs, "whatsapp-throughput", "WHATSAPP_THROUGHPUT")
		fs.BoolVar(&c.coexistence, "whatsapp-coexistence", false, "the number is in use with the WhatsApp Business app too: at most 20 messages per second, whatever the Graph API says")
		cliflag.BindEnv(fs, "whatsapp-coexistence", "WHATSAPP_COEXISTENCE")
		return c
	},
}

// whatsAppFlags is the Cloud API's configuration as its flags fill it.
type whatsAppFlags struct {
	phoneID, token, templates, baseURL, accountID string
	retryUnknown, coexistence                     bool
	throughput                                    int
}

func (c *whatsAppFlags) Missing() string {
	if c.phoneID == "" || c.token == "" || c.templates == "" {
		return "--whatsapp-phone-number-id, --whatsapp-token and --whatsapp-templates"
	}
	return ""
}

func (c *whatsAppFlags) Build(io.Writer) (transport.Transport, error) {
	templates, err := transport.LoadWhatsAppTemplates(c.templates)
	if err != nil {
		return nil, err
	}
	return transport.NewWhatsApp(transport.WhatsAppConfig{BaseURL: c.baseURL, PhoneNumberID: c.phoneID, BusinessAccountID: c.accountID,
		AccessToken: c.token, Templates: templates, Throughput: c.throughput, Coexistence: c.coexistence})
}

// RetryUnknown is --whatsapp-retry-unknown: the Cloud API has no
// idempotency key, so a send whose outcome is unknown fails unless it is
// given.
func (c *whatsAppFlags) RetryUnknown() bool { return c.retryUnknown }

// logKind is --transport log, without flags of its own. It writes to the
// command's stderr.
var logKind = transportKind{
	Name:  "log",
	Help:  "one JSON line per message on stderr, nothing sent (dry runs)",
	Flags: func(*pflag.FlagSet) transportConfig { return logFlags{} },
}

// logFlags is the log's configuration: none.
type logFlags struct{}

func (logFlags) Missing() string { return "" }
func (logFlags) Build(stderr io.Writer) (transport.Transport, error) {
	return transport.NewLog(stderr), nil
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
