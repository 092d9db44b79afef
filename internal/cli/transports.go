package cli

import (
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// transportKind is one way queue-process (and the jobs' queue step) can
// deliver: its --transport name, its own flags, the ones it cannot do
// without, and how it is built from them. A new transport is a package in
// sender/transport and a row of transports (docs/development.md, "Adding a
// transport").
type transportKind struct {
	name string
	// register adds the transport's own flags, onto the delivery flags.
	register func(fs *pflag.FlagSet, f *deliveryFlags)
	// missing names the required flags f lacks ("" when none).
	missing func(f *deliveryFlags) string
	// build makes the transport; its error is a usage error.
	build func(f *deliveryFlags, stderr io.Writer) (transport.Transport, error)
}

// transports is every transport, in the order --help lists them.
var transports = []transportKind{
	{
		name: "webhook",
		register: func(fs *pflag.FlagSet, f *deliveryFlags) {
			fs.StringVar(&f.webhookURL, "webhook-url", "", "the bot's endpoint, for --transport webhook")
			bindEnv(fs, "webhook-url", "ENGAGEMENT_WEBHOOK_URL")
			fs.StringVar(&f.webhookSecret, "webhook-secret", "", "HMAC-SHA256 key signing webhook bodies")
			bindEnv(fs, "webhook-secret", "ENGAGEMENT_WEBHOOK_SECRET")
			markSecret(fs, "webhook-secret")
		},
		missing: func(f *deliveryFlags) string {
			return needs(f.webhookURL == "", "--webhook-url (or ENGAGEMENT_WEBHOOK_URL)")
		},
		build: func(f *deliveryFlags, _ io.Writer) (transport.Transport, error) {
			return transport.NewWebhook(transport.WebhookConfig{URL: f.webhookURL, Secret: f.webhookSecret})
		},
	},
	{
		// Meta's Cloud API. The transport calls itself "whatsapp" (its
		// Name), the name its ledger rows and its shared pace are stored
		// under: renaming it would split the pace of a rolling deploy in
		// two and orphan the ledger rows of sends in flight.
		name: "whatsapp-cloud",
		register: func(fs *pflag.FlagSet, f *deliveryFlags) {
			fs.StringVar(&f.waPhoneID, "whatsapp-phone-number-id", "", "Cloud API phone number id, for --transport whatsapp-cloud")
			bindEnv(fs, "whatsapp-phone-number-id", "WHATSAPP_PHONE_NUMBER_ID")
			fs.StringVar(&f.waToken, "whatsapp-token", "", "Cloud API access token")
			bindEnv(fs, "whatsapp-token", "WHATSAPP_ACCESS_TOKEN")
			markSecret(fs, "whatsapp-token")
			fs.StringVar(&f.waTemplates, "whatsapp-templates", "", "JSON file mapping message keys to approved templates")
			bindEnv(fs, "whatsapp-templates", "WHATSAPP_TEMPLATES")
			fs.StringVar(&f.waBaseURL, "whatsapp-base-url", "", "Cloud API base URL (default Meta's)")
			bindEnv(fs, "whatsapp-base-url", "WHATSAPP_BASE_URL")
			fs.BoolVar(&f.waRetry, "whatsapp-retry-unknown", false, "retry a Cloud API send whose outcome is unknown (a 5xx, a timeout) instead of failing it: the message may arrive twice")
		},
		missing: func(f *deliveryFlags) string {
			return needs(f.waPhoneID == "" || f.waToken == "" || f.waTemplates == "",
				"--whatsapp-phone-number-id, --whatsapp-token and --whatsapp-templates")
		},
		build: func(f *deliveryFlags, _ io.Writer) (transport.Transport, error) {
			templates, err := transport.LoadWhatsAppTemplates(f.waTemplates)
			if err != nil {
				return nil, err
			}
			return transport.NewWhatsApp(transport.WhatsAppConfig{
				BaseURL: f.waBaseURL, PhoneNumberID: f.waPhoneID, AccessToken: f.waToken, Templates: templates})
		},
	},
	{
		name:     "log",
		register: func(*pflag.FlagSet, *deliveryFlags) {},
		missing:  func(*deliveryFlags) string { return "" },
		build: func(_ *deliveryFlags, stderr io.Writer) (transport.Transport, error) {
			return transport.NewLog(stderr), nil
		},
	},
}

// needs is what when lacking, else "".
func needs(lacking bool, what string) string {
	if lacking {
		return what
	}
	return ""
}

// transportNames lists the transports for help and errors: "webhook,
// whatsapp-cloud or log".
func transportNames() string {
	names := make([]string, len(transports))
	for i, t := range transports {
		names[i] = t.name
	}
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " or " + names[last]
}
