package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/idempotency"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/sender"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// deliveryFlags configure the transport and the pace of delivery: the
// flags of queue-process and, the same flags built by the same register,
// of the daily and weekly jobs' trailing queue step.
type deliveryFlags struct {
	transport     string
	webhookURL    string
	webhookSecret string
	sendInterval  time.Duration
	maxRetries    int
	retryBase     time.Duration
	claimTimeout  time.Duration
	maxDuration   time.Duration
	catalog       string
	workers       int
	dedupeStore   string
	dedupeTTL     time.Duration
	dedupeOpen    bool
	waPhoneID     string
	waToken       string
	waTemplates   string
	waRetry       bool
	waBaseURL     string
	quietHours    string
	timezone      string
}

// Titles of the --help section the delivery flags are listed in.
const (
	deliveryGroup  = "Delivery flags"
	queueStepGroup = "Queue step (delivery) flags, used only with --transport and without --skip-send"
)

// register adds the delivery flags to fs, listed in --help under group.
func (f *deliveryFlags) register(fs *pflag.FlagSet, group string) {
	own := pflag.NewFlagSet(group, pflag.ContinueOnError)
	f.registerOn(own)
	setGroup(own, group)
	fs.AddFlagSet(own)
}

func (f *deliveryFlags) registerOn(fs *pflag.FlagSet) {
	fs.StringVar(&f.transport, "transport", "", "webhook, whatsapp-cloud or log")
	bindEnv(fs, "transport", "ENGAGEMENT_TRANSPORT")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "the bot's endpoint, for --transport webhook")
	bindEnv(fs, "webhook-url", "ENGAGEMENT_WEBHOOK_URL")
	fs.StringVar(&f.webhookSecret, "webhook-secret", "", "HMAC-SHA256 key signing webhook bodies")
	bindEnv(fs, "webhook-secret", "ENGAGEMENT_WEBHOOK_SECRET")
	fs.DurationVar(&f.sendInterval, "send-interval", sender.DefaultSendInterval, "least time between two sends, across all processes (0: no pacing)")
	fs.IntVar(&f.maxRetries, "max-retries", sender.DefaultMaxRetries, "retries after the first attempt (0: none)")
	fs.DurationVar(&f.retryBase, "retry-base", sender.DefaultRetryBase, "first retry's delay, doubled for each next")
	fs.DurationVar(&f.claimTimeout, "claim-timeout", sender.DefaultClaimTimeout, "how long a claim lives before it counts as abandoned")
	fs.DurationVar(&f.maxDuration, "max-duration", 0, "stop claiming after this long (0: until the queue is drained)")
	fs.IntVar(&f.workers, "workers", sender.DefaultWorkers, "sends in flight at once, paced or not (1-64)")
	fs.StringVar(&f.catalog, "catalog", "", "JSON file of message templates laid over the built-in catalog")
	fs.StringVar(&f.dedupeStore, "dedupe-store", "", `extra send guard: "postgres" or a redis:// URL`)
	bindEnv(fs, "dedupe-store", "ENGAGEMENT_DEDUPE_STORE")
	fs.DurationVar(&f.dedupeTTL, "dedupe-ttl", idempotency.DefaultTTL, "how long the dedupe store remembers a sent key, with --dedupe-store")
	fs.BoolVar(&f.dedupeOpen, "dedupe-fail-open", false, "send anyway (and warn) when the dedupe store is down; default: stop")
	bindEnv(fs, "catalog", "ENGAGEMENT_CATALOG")
	fs.StringVar(&f.quietHours, "quiet-hours", "", "HH:MM-HH:MM (may wrap midnight): due messages wait until they end, in the user's time zone")
	bindEnv(fs, "quiet-hours", "ENGAGEMENT_QUIET_HOURS")
	fs.StringVar(&f.timezone, "timezone", "UTC", "IANA time zone of the quiet hours, for users without user_profiles.timezone")
	bindEnv(fs, "timezone", "ENGAGEMENT_TIMEZONE")
	fs.StringVar(&f.waPhoneID, "whatsapp-phone-number-id", "", "Cloud API phone number id, for --transport whatsapp-cloud")
	bindEnv(fs, "whatsapp-phone-number-id", "WHATSAPP_PHONE_NUMBER_ID")
	fs.StringVar(&f.waToken, "whatsapp-token", "", "Cloud API access token")
	bindEnv(fs, "whatsapp-token", "WHATSAPP_ACCESS_TOKEN")
	fs.StringVar(&f.waTemplates, "whatsapp-templates", "", "JSON file mapping message keys to approved templates")
	bindEnv(fs, "whatsapp-templates", "WHATSAPP_TEMPLATES")
	fs.StringVar(&f.waBaseURL, "whatsapp-base-url", "", "Cloud API base URL (default Meta's)")
	bindEnv(fs, "whatsapp-base-url", "WHATSAPP_BASE_URL")
	fs.BoolVar(&f.waRetry, "whatsapp-retry-unknown", false, "retry a Cloud API send whose outcome is unknown (a 5xx, a timeout) instead of failing it: the message may arrive twice")
}

// validate checks the delivery flags' values, before any work and whether
// or not a transport is given: a value out of range is a usage error
// (exit 2) with one line naming the flag. 0 means "none" for the flags
// whose help says so, never "the default": each flag's default is the
// value --help shows.
func (f *deliveryFlags) validate() error {
	switch {
	case f.workers < 1 || f.workers > 64:
		return usagef("--workers must be from 1 to 64, got %d", f.workers)
	case f.sendInterval < 0:
		return usagef("--send-interval must not be negative (0: no pacing), got %s", f.sendInterval)
	case f.maxRetries < 0:
		return usagef("--max-retries must not be negative (0: no retries), got %d", f.maxRetries)
	case f.retryBase <= 0:
		return usagef("--retry-base must be positive, got %s", f.retryBase)
	case f.claimTimeout < sender.MinClaimTimeout:
		return usagef("--claim-timeout must be at least %s, got %s", sender.MinClaimTimeout, f.claimTimeout)
	case f.maxDuration < 0:
		return usagef("--max-duration must not be negative (0: until the queue is drained), got %s", f.maxDuration)
	case f.dedupeTTL <= 0:
		return usagef("--dedupe-ttl must be positive, got %s", f.dedupeTTL)
	}
	if f.quietHours != "" {
		if _, err := sender.ParseQuietHours(f.quietHours); err != nil {
			return usagef("--quiet-hours: %v", err)
		}
	}
	if _, err := time.LoadLocation(f.timezone); err != nil || f.timezone == "" || f.timezone == "Local" {
		return usagef("--timezone: %q is not an IANA time zone such as America/Sao_Paulo", f.timezone)
	}
	if f.dedupeStore != "" {
		// Checked now, opened once the database is (the postgres store uses its pool).
		if err := idempotency.CheckSpec(f.dedupeStore); err != nil {
			return usageError(err)
		}
	}
	return nil
}

// processorConfig validates the flags and builds the processor's
// configuration. Every error is a usage error: found before any work.
func (f *deliveryFlags) processorConfig(stderr io.Writer) (sender.ProcessorConfig, error) {
	var cfg sender.ProcessorConfig
	if err := f.validate(); err != nil {
		return cfg, err
	}
	var err error
	switch f.transport {
	case "":
		return cfg, usagef("no transport: set --transport (or ENGAGEMENT_TRANSPORT) to webhook, whatsapp-cloud or log")
	case "webhook":
		if f.webhookURL == "" {
			return cfg, usagef("--transport webhook needs --webhook-url (or ENGAGEMENT_WEBHOOK_URL)")
		}
		cfg.Transport, err = transport.NewWebhook(transport.WebhookConfig{URL: f.webhookURL, Secret: f.webhookSecret})
	case "whatsapp-cloud":
		if f.waPhoneID == "" || f.waToken == "" || f.waTemplates == "" {
			return cfg, usagef("--transport whatsapp-cloud needs --whatsapp-phone-number-id, --whatsapp-token and --whatsapp-templates")
		}
		var templates map[string]transport.WhatsAppTemplate
		if templates, err = transport.LoadWhatsAppTemplates(f.waTemplates); err == nil {
			cfg.Transport, err = transport.NewWhatsApp(transport.WhatsAppConfig{
				BaseURL: f.waBaseURL, PhoneNumberID: f.waPhoneID, AccessToken: f.waToken, Templates: templates})
		}
	case "log":
		cfg.Transport = transport.NewLog(stderr)
	default:
		return cfg, usagef("unknown transport %q: use webhook, whatsapp-cloud or log", f.transport)
	}
	if err != nil {
		return cfg, usageError(err)
	}
	cfg.Catalog = sender.DefaultCatalog()
	if f.catalog != "" {
		if cfg.Catalog, err = sender.LoadCatalog(f.catalog); err != nil {
			return cfg, usageError(err)
		}
	}
	if f.quietHours != "" {
		cfg.QuietHours, _ = sender.ParseQuietHours(f.quietHours) // validated above
	}
	// The flags' values, as they are: sender.ProcessorConfig reads a zero
	// SendInterval as "no pacing", as the flag does, but a zero MaxRetries
	// as "the default" (negative: none), so --max-retries 0 is passed as
	// -1.
	cfg.Workers = f.workers
	cfg.Timezone = f.timezone
	cfg.SendInterval = f.sendInterval
	cfg.MaxRetries = f.maxRetries
	if f.maxRetries == 0 {
		cfg.MaxRetries = -1
	}
	cfg.RetryBase = f.retryBase
	cfg.ClaimTimeout = f.claimTimeout
	cfg.RetryUnknown = f.waRetry
	if f.dedupeStore != "" {
		cfg.DedupeTTL = f.dedupeTTL
	}
	if f.maxDuration > 0 {
		cfg.Deadline = time.Now().Add(f.maxDuration)
	}
	return cfg, nil
}

// attachDedupe opens the --dedupe-store, if any, on pool.
func (f *deliveryFlags) attachDedupe(cfg *sender.ProcessorConfig, pool *pgxpool.Pool, log zerolog.Logger) error {
	if f.dedupeStore == "" {
		return nil
	}
	mode := idempotency.FailClosed
	if f.dedupeOpen {
		mode = idempotency.FailOpen
	}
	store, err := idempotency.ParseStore(f.dedupeStore, pool, idempotency.Options{FailMode: mode, Logger: log})
	if err != nil {
		return usageError(err)
	}
	cfg.Dedupe = store
	return nil
}

// NewQueueCommand builds the queue-process command.
func NewQueueCommand() *cobra.Command {
	var (
		databaseURL   string
		output        string
		failOnPartial bool
		delivery      deliveryFlags
		logs          logFlags
		pushMetrics   metricsFlags
	)
	cmd := &cobra.Command{
		Use:   "queue-process",
		Short: "Deliver due queued messages through a transport",
		Long: `Claims due pending messages (any number of queue-process instances can run at
once), renders each in the user's locale, and delivers it through the
transport: webhook (the running bot), whatsapp-cloud (Meta's Cloud API,
template messages) or log. Failures are retried with exponential backoff;
the pace holds across every running process. SIGTERM stops claiming,
finishes the send in flight and releases the rest.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (err error) {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			if err := requireDatabaseURL(databaseURL); err != nil {
				return err
			}
			if err := validateOutput(output); err != nil {
				return err
			}
			if err := pushMetrics.validate(); err != nil {
				return err
			}
			log, err := logs.logger(cmd.ErrOrStderr(), "queue-process")
			if err != nil {
				return err
			}
			cfg, err := delivery.processorConfig(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			cfg.Logger = log
			ctx := log.WithContext(cmd.Context()) // the pool logs server warnings with it
			// The run's metrics are pushed however it ends, a failure included.
			var sum sender.ProcessSummary
			defer func(start time.Time) { pushMetrics.pushQueue(ctx, log, start, sum, err) }(time.Now())
			pool, err := openChecked(ctx, databaseURL, "queue-process")
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := delivery.attachDedupe(&cfg, pool, log); err != nil {
				return err
			}
			p, err := sender.NewProcessor(pool, cfg)
			if err != nil {
				return err
			}
			log.Info().Str("transport", cfg.Transport.Name()).Msg("queue-process started")
			sum, err = p.Run(ctx)
			pushMetrics.readQueue(ctx, log, pool) // the backlog it leaves, for the push
			if err != nil {
				return postgres.Redact(err, databaseURL)
			}
			log.Info().Int("processed", sum.Processed).Int("sent", sum.Sent).Int("retried", sum.Retried).
				Int("failed", sum.Failed).Int("cancelled", sum.Cancelled).Int("deferred", sum.Deferred).
				Int64("duration_ms", sum.DurationMS).Msg("queue-process finished")
			if err := writeQueueSummary(cmd.OutOrStdout(), output, sum); err != nil {
				return err
			}
			if failOnPartial && sum.Failed > 0 {
				return errPartial
			}
			return nil
		}),
	}
	fs := cmd.Flags()
	registerDatabaseURL(fs, &databaseURL)
	fs.StringVar(&output, "output", "text", "summary format on stdout: text or json")
	fs.BoolVar(&failOnPartial, "fail-on-partial", false, "exit 3 when any message failed")
	delivery.register(fs, deliveryGroup)
	logs.register(fs)
	pushMetrics.register(fs)
	cmd.SetUsageFunc(groupedUsage)
	return cmd
}

func writeQueueSummary(w io.Writer, format string, sum sender.ProcessSummary) error {
	var err error
	if format == "json" {
		err = json.NewEncoder(w).Encode(sum)
	} else {
		_, err = fmt.Fprintf(w, "queue-process via %s: %d processed, %d sent, %d retried, %d failed, %d cancelled, %d deferred in %s\n",
			sum.Transport, sum.Processed, sum.Sent, sum.Retried, sum.Failed, sum.Cancelled, sum.Deferred,
			time.Duration(sum.DurationMS)*time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
