package queuecmd

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/idempotency"
	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/sender"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// DeliveryFlags configure the transport and the pace of delivery: the
// flags of queue-process and, the same flags built by the same register,
// of the daily and weekly jobs' trailing queue step.
type DeliveryFlags struct {
	transport string
	// transports holds each kind's configuration, by --transport name, as
	// its own flags fill it (see transports).
	transports   map[string]transportConfig
	sendInterval time.Duration
	sendJitter   time.Duration
	spread       bool
	maxRetries   int
	retryBase    time.Duration
	claimTimeout time.Duration
	maxDuration  time.Duration
	catalog      string
	workers      int
	dedupeStore  string
	dedupeTTL    time.Duration
	dedupeOpen   bool
	quietHours   string
	timezone     string
	dailyLimit   int
	dailyAuto    bool // --daily-limit auto
	portfolio    string
	ramp         string
	warmUp       bool
	reachout     time.Duration
	kindPriority string
	priorityWait time.Duration
	perUserCap   int
	capWindow    time.Duration
}

// Titles of the --help section the delivery flags are listed in.
const (
	deliveryGroup  = "Delivery flags"
	QueueStepGroup = "Queue step (delivery) flags, used only with --transport and without --skip-send"
)

// Register adds the delivery flags to fs, listed in --help under group.
func (f *DeliveryFlags) Register(fs *pflag.FlagSet, group string) {
	own := pflag.NewFlagSet(group, pflag.ContinueOnError)
	f.registerOn(own)
	cli.SetGroup(own, group)
	fs.AddFlagSet(own)
}

func (f *DeliveryFlags) registerOn(fs *pflag.FlagSet) {
	fs.StringVar(&f.transport, "transport", "", transportNames())
	cliflag.BindEnv(fs, "transport", "ENGAGEMENT_TRANSPORT")
	fs.DurationVar(&f.sendInterval, "send-interval", delivery.DefaultSendInterval, "least time between two sends, across all processes (0: no pacing)")
	fs.DurationVar(&f.sendJitter, "send-jitter", 0, "add a random part of this to every gap between two sends, so they do not tick like a machine's: gaps from --send-interval (the floor) to --send-interval plus this, across all processes (at most --send-interval; 0: none)")
	cliflag.BindEnv(fs, "send-jitter", "ENGAGEMENT_SEND_JITTER")
	fs.BoolVar(&f.spread, "spread-budget", false, "spread the day's --daily-limit over the waking hours (the day less --quiet-hours): the gap between two sends becomes the waking hours over the limit, never below --send-interval")
	cliflag.BindEnv(fs, "spread-budget", "ENGAGEMENT_SPREAD_BUDGET")
	fs.IntVar(&f.maxRetries, "max-retries", delivery.DefaultMaxRetries, "retries after the first attempt (0: none)")
	fs.DurationVar(&f.retryBase, "retry-base", delivery.DefaultRetryBase, "first retry's delay, doubled for each next")
	fs.DurationVar(&f.claimTimeout, "claim-timeout", delivery.DefaultClaimTimeout, "how long a claim lives before it counts as abandoned")
	fs.DurationVar(&f.maxDuration, "max-duration", 0, "stop claiming after this long (0: until the queue is drained)")
	fs.IntVar(&f.workers, "workers", delivery.DefaultWorkers, "sends in flight at once, paced or not (1-64)")
	fs.StringVar(&f.catalog, "catalog", "", "JSON file of message templates laid over the built-in catalog")
	fs.StringVar(&f.dedupeStore, "dedupe-store", "", `extra send guard: "postgres" or a redis:// URL`)
	cliflag.BindEnv(fs, "dedupe-store", "ENGAGEMENT_DEDUPE_STORE")
	cliflag.MarkSecret(fs, "dedupe-store")
	fs.DurationVar(&f.dedupeTTL, "dedupe-ttl", idempotency.DefaultTTL, "how long the dedupe store remembers a sent key, with --dedupe-store")
	fs.BoolVar(&f.dedupeOpen, "dedupe-fail-open", false, "send anyway (and warn) when the dedupe store is down; default: stop")
	cliflag.BindEnv(fs, "catalog", "ENGAGEMENT_CATALOG")
	fs.StringVar(&f.quietHours, "quiet-hours", "", "HH:MM-HH:MM (may wrap midnight): due messages wait until they end, in the user's time zone")
	cliflag.BindEnv(fs, "quiet-hours", "ENGAGEMENT_QUIET_HOURS")
	fs.StringVar(&f.timezone, "timezone", "UTC", "IANA time zone of the quiet hours, for users without user_profiles.timezone")
	cliflag.BindEnv(fs, "timezone", "ENGAGEMENT_TIMEZONE")
	fs.Var(&limitValue{n: &f.dailyLimit, auto: &f.dailyAuto}, "daily-limit", "send budget: at most this many distinct recipients per transport in any rolling 24 hours, across all processes (0: none); auto: Meta's messaging limit of the business portfolio, read at start (whatsapp-cloud), counting only recipients outside their customer service window")
	cliflag.BindEnv(fs, "daily-limit", "ENGAGEMENT_DAILY_LIMIT")
	fs.StringVar(&f.portfolio, "whatsapp-business-portfolio-id", "", "with --daily-limit auto: the Meta business portfolio the number belongs to; the processes of all its numbers share one budget, Meta's limit of the portfolio (default: one budget for every Cloud API process of the database)")
	cliflag.BindEnv(fs, "whatsapp-business-portfolio-id", "WHATSAPP_BUSINESS_PORTFOLIO_ID")
	fs.StringVar(&f.ramp, "daily-limit-ramp", "", "warm-up for a new number, START,FACTOR: START recipients the first day, FACTOR times more each next day, up to --daily-limit")
	cliflag.BindEnv(fs, "daily-limit-ramp", "ENGAGEMENT_DAILY_LIMIT_RAMP")
	fs.BoolVar(&f.warmUp, "warm-up", false, fmt.Sprintf("warm up a new number on the webhook (an unofficial client such as Baileys): --daily-limit-ramp %s up to --daily-limit (default %d); the figures are what Baileys users report, not a published rule (docs/baileys.md)", delivery.WarmUp, delivery.WarmUpLimit))
	cliflag.BindEnv(fs, "warm-up", "ENGAGEMENT_WARM_UP")
	fs.DurationVar(&f.reachout, "reachout-window", delivery.DefaultReachoutWindow, "on the webhook, cancel (reachout_window) a message to a user whose last message to the bot is older than this: WhatsApp refuses it, error 463 (docs/baileys.md; 0: off)")
	cliflag.BindEnv(fs, "reachout-window", "ENGAGEMENT_REACHOUT_WINDOW")
	fs.StringVar(&f.kindPriority, "kind-priority", "", "message types, comma-separated, that go first, in this order, when the send budget cannot take every due message (default: oldest due first)")
	cliflag.BindEnv(fs, "kind-priority", "ENGAGEMENT_KIND_PRIORITY")
	fs.DurationVar(&f.priorityWait, "kind-priority-max-wait", delivery.DefaultKindPriorityMaxWait, "with --kind-priority, a message queued longer than this goes first whatever its type, so no type starves")
	cliflag.BindEnv(fs, "kind-priority-max-wait", "ENGAGEMENT_KIND_PRIORITY_MAX_WAIT")
	fs.IntVar(&f.perUserCap, "per-user-cap", 0, "at most this many marketing messages to one user in any --per-user-cap-window, across kinds and processes; one over it waits (0: none)")
	cliflag.BindEnv(fs, "per-user-cap", "ENGAGEMENT_PER_USER_CAP")
	fs.DurationVar(&f.capWindow, "per-user-cap-window", delivery.DefaultPerUserCapWindow, "the per-user cap's rolling window")
	cliflag.BindEnv(fs, "per-user-cap-window", "ENGAGEMENT_PER_USER_CAP_WINDOW")
	f.transports = make(map[string]transportConfig, len(transports))
	for _, t := range transports {
		f.transports[t.Name] = t.Flags(fs)
	}
}

// Transport is --transport's value: "" when no transport is given.
func (f *DeliveryFlags) Transport() string { return f.transport }

// QuietHours are --quiet-hours and --timezone as Validate checked them,
// for a job that schedules around them whether or not it delivers
// (engagement-daily --best-hour): unset quiet hours when none are given.
func (f *DeliveryFlags) QuietHours() (delivery.QuietHours, string) {
	q, _ := delivery.ParseQuietHours(f.quietHours) // validated; "" is unset
	return q, f.timezone
}

// Validate checks the delivery flags' values, before any work and whether
// or not a transport is given: a value out of range is a usage error
// (exit 2) with one line naming the flag. 0 means "none" for the flags
// whose help says so, never "the default": each flag's default is the
// value --help shows.
func (f *DeliveryFlags) Validate() error {
	if err := f.applyWarmUp(); err != nil {
		return err
	}
	if err := f.checkRanges(); err != nil {
		return err
	}
	if f.portfolio != "" {
		if err := delivery.ValidPortfolioID(f.portfolio); err != nil {
			return cli.Usagef("--whatsapp-business-portfolio-id: %v", err)
		}
	}
	if f.ramp != "" {
		if _, err := delivery.ParseRamp(f.ramp); err != nil {
			return cli.Usagef("--daily-limit-ramp: %v", err)
		}
	}
	if _, err := delivery.ParseKindPriority(f.kindPriority); err != nil {
		return cli.Usagef("--kind-priority: %v", err)
	}
	switch {
	case f.priorityWait <= 0:
		return cli.Usagef("--kind-priority-max-wait must be positive, got %s", f.priorityWait)
	case f.perUserCap < 0:
		return cli.Usagef("--per-user-cap must not be negative (0: none), got %d", f.perUserCap)
	case f.capWindow <= 0:
		return cli.Usagef("--per-user-cap-window must be positive, got %s", f.capWindow)
	}
	if f.quietHours != "" {
		if _, err := delivery.ParseQuietHours(f.quietHours); err != nil {
			return cli.Usagef("--quiet-hours: %v", err)
		}
	}
	if _, err := time.LoadLocation(f.timezone); err != nil || f.timezone == "" || f.timezone == "Local" {
		return cli.Usagef("--timezone: %q is not an IANA time zone such as America/Sao_Paulo", f.timezone)
	}
	if f.dedupeStore != "" {
		// Checked now, opened once the database is (the postgres store uses its pool).
		if err := idempotency.CheckSpec(f.dedupeStore); err != nil {
			return cli.UsageError(err)
		}
	}
	return nil
}

// checkRanges refuses the pacing, retry, deadline and budget flags out of
// their range, or given without the flag they depend on.
func (f *DeliveryFlags) checkRanges() error {
	switch {
	case f.workers < 1 || f.workers > 64:
		return cli.Usagef("--workers must be from 1 to 64, got %d", f.workers)
	case f.sendInterval < 0:
		return cli.Usagef("--send-interval must not be negative (0: no pacing), got %s", f.sendInterval)
	case f.sendJitter < 0:
		return cli.Usagef("--send-jitter must not be negative (0: none), got %s", f.sendJitter)
	case f.sendJitter > f.sendInterval:
		return cli.Usagef("--send-jitter %s is above --send-interval %s: the jitter may at most double the gap", f.sendJitter, f.sendInterval)
	case f.spread && f.sendInterval == 0:
		return cli.Usagef("--spread-budget needs pacing: a --send-interval above 0")
	case f.spread && f.dailyLimit == 0 && !f.dailyAuto:
		return cli.Usagef("--spread-budget needs --daily-limit (or ENGAGEMENT_DAILY_LIMIT): the budget it spreads")
	case f.maxRetries < 0:
		return cli.Usagef("--max-retries must not be negative (0: no retries), got %d", f.maxRetries)
	case f.retryBase <= 0:
		return cli.Usagef("--retry-base must be positive, got %s", f.retryBase)
	case f.claimTimeout < delivery.MinClaimTimeout:
		return cli.Usagef("--claim-timeout must be at least %s, got %s", delivery.MinClaimTimeout, f.claimTimeout)
	case f.maxDuration < 0:
		return cli.Usagef("--max-duration must not be negative (0: until the queue is drained), got %s", f.maxDuration)
	case f.dedupeTTL <= 0:
		return cli.Usagef("--dedupe-ttl must be positive, got %s", f.dedupeTTL)
	case f.reachout < 0:
		return cli.Usagef("--reachout-window must not be negative (0: off), got %s", f.reachout)
	case f.dailyLimit < 0:
		return cli.Usagef("--daily-limit must not be negative (0: none), got %d", f.dailyLimit)
	case f.ramp != "" && f.dailyLimit == 0 && !f.dailyAuto:
		return cli.Usagef("--daily-limit-ramp needs --daily-limit (or ENGAGEMENT_DAILY_LIMIT), the most it grows to")
	case f.portfolio != "" && !f.dailyAuto:
		return cli.Usagef("--whatsapp-business-portfolio-id needs --daily-limit auto: the portfolio's budget is Meta's limit")
	}
	return nil
}

// applyWarmUp makes --warm-up the ramp it stands for, up to --daily-limit
// or, without one, delivery.WarmUpLimit. It is a shorthand: with
// --daily-limit-ramp or --daily-limit auto it is a usage error.
func (f *DeliveryFlags) applyWarmUp() error {
	switch {
	case !f.warmUp:
		return nil
	case f.ramp != "":
		return cli.Usagef("--warm-up is --daily-limit-ramp %s: give one of them, not both", delivery.WarmUp)
	case f.dailyAuto:
		return cli.Usagef("--warm-up is for the webhook; --daily-limit auto follows Meta's tiers, which are the Cloud API's ramp")
	}
	f.ramp = delivery.WarmUp.String()
	if f.dailyLimit == 0 {
		f.dailyLimit = delivery.WarmUpLimit
	}
	return nil
}

// ProcessorConfig builds the processor's configuration from flags Validate
// passed. Every error is a usage error: found before any work.
func (f *DeliveryFlags) ProcessorConfig(stderr io.Writer) (delivery.ProcessorConfig, error) {
	var cfg delivery.ProcessorConfig
	if f.transport == "" {
		return cfg, cli.Usagef("no transport: set --transport (or ENGAGEMENT_TRANSPORT) to %s", transportNames())
	}
	conf, ok := f.transports[f.transport]
	if !ok {
		return cfg, cli.Usagef("unknown transport %q: use %s", f.transport, transportNames())
	}
	if f.warmUp && f.transport == whatsAppCloudKind.Name {
		return cfg, cli.Usagef("--warm-up is for the webhook: on --transport %s, Meta's messaging limit tiers are the ramp (docs/delivery.md, \"Choosing the budget\")", f.transport)
	}
	if missing := conf.Missing(); missing != "" {
		return cfg, cli.Usagef("--transport %s needs %s", f.transport, missing)
	}
	var err error
	cfg.Transport, err = conf.Build(stderr)
	if err != nil {
		return cfg, cli.UsageError(err)
	}
	if r, ok := conf.(unknownRetrier); ok {
		cfg.RetryUnknown = r.RetryUnknown()
	}
	if cfg.Catalog, err = f.Catalog(); err != nil {
		return cfg, err
	}
	if err := f.checkTemplates(cfg); err != nil {
		return cfg, err
	}
	if f.quietHours != "" {
		cfg.QuietHours, _ = delivery.ParseQuietHours(f.quietHours) // validated above
	}
	// The flags' 0 is "none"; delivery.ProcessorConfig's, as River's, is
	// "the default", and -1 is none.
	cfg.Workers = f.workers
	cfg.Timezone = f.timezone
	cfg.SendInterval = offIfZero(f.sendInterval)
	cfg.SendJitter, cfg.SpreadBudget = f.sendJitter, f.spread
	cfg.MaxRetries = offIfZero(f.maxRetries)
	cfg.RetryBase = f.retryBase
	cfg.ClaimTimeout = f.claimTimeout
	cfg.DailyLimit, cfg.DailyLimitAuto, cfg.BusinessPortfolioID = f.dailyLimit, f.dailyAuto, f.portfolio
	if _, ok := cfg.Transport.(transport.HealthReader); f.dailyAuto && !ok {
		return cfg, cli.Usagef("--daily-limit auto follows Meta's messaging limit tier: it needs --transport whatsapp-cloud, not %s", f.transport)
	}
	if f.ramp != "" {
		cfg.Ramp, _ = delivery.ParseRamp(f.ramp) // validated above
	}
	cfg.ReachoutWindow = offIfZero(f.reachout)
	cfg.KindPriority, _ = delivery.ParseKindPriority(f.kindPriority) // validated above
	cfg.KindPriorityMaxWait = f.priorityWait
	cfg.PerUserCap, cfg.PerUserCapWindow = f.perUserCap, f.capWindow
	if f.dedupeStore != "" {
		cfg.DedupeTTL = f.dedupeTTL
	}
	if f.maxDuration > 0 {
		cfg.Deadline = time.Now().Add(f.maxDuration)
	}
	return cfg, nil
}

// checkTemplates refuses a transport of approved templates (the Cloud
// API) that lacks the template of a copy variant of cfg's catalog: that
// variant would fail every send.
func (f *DeliveryFlags) checkTemplates(cfg delivery.ProcessorConfig) error {
	t, ok := cfg.Transport.(interface{ HasTemplate(key string) bool })
	if !ok {
		return nil
	}
	// A transport of approved templates (the Cloud API) must know
	// every variant's: a variant without one would fail every send.
	for _, key := range cfg.Catalog.VariantKeys() {
		if !t.HasTemplate(key) {
			return cli.Usagef("--transport %s: no template for %q, a copy variant of the catalog (each variant is its own approved template)", f.transport, key)
		}
	}
	return nil
}

// Catalog is --catalog laid over the embedded catalog, or the embedded
// one; a file that is not a valid catalog (its variants included) is a
// usage error.
func (f *DeliveryFlags) Catalog() (*sender.Catalog, error) {
	if f.catalog == "" {
		return sender.DefaultCatalog(), nil
	}
	c, err := sender.LoadCatalog(f.catalog)
	if err != nil {
		return nil, cli.UsageError(err)
	}
	return c, nil
}

// offIfZero is v, or -1 (off, in the Go API) when v is 0 (off, on the
// command line).
func offIfZero[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// AttachDedupe opens the --dedupe-store, if any, on pool.
func (f *DeliveryFlags) AttachDedupe(cfg *delivery.ProcessorConfig, pool *pgxpool.Pool, log zerolog.Logger) error {
	if f.dedupeStore == "" {
		return nil
	}
	mode := idempotency.FailClosed
	if f.dedupeOpen {
		mode = idempotency.FailOpen
	}
	store, err := idempotency.ParseStore(f.dedupeStore, pool, idempotency.Options{FailMode: mode, Logger: log})
	if err != nil {
		return cli.UsageError(err)
	}
	cfg.Dedupe = store
	return nil
}

// limitValue is --daily-limit: a whole number of recipients, or "auto"
// (Meta's messaging limit tier, read at start).
type limitValue struct {
	n    *int
	auto *bool
}

func (v *limitValue) String() string {
	if v.auto != nil && *v.auto {
		return "auto"
	}
	if v.n == nil {
		return "0"
	}
	return strconv.Itoa(*v.n)
}

func (v *limitValue) Set(s string) error {
	if strings.TrimSpace(s) == "auto" {
		*v.n, *v.auto = 0, true
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is neither a whole number nor auto", s)
	}
	*v.n, *v.auto = n, false
	return nil
}

func (v *limitValue) Type() string { return "int|auto" }
