package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// envAnnotation names the environment variable a flag falls back to.
const envAnnotation = "engagement_env"

// bindEnv makes flag fall back to the environment variable env when it is not
// given on the command line (the flag wins), and says so in --help. The
// variable's value never appears in the help text.
func bindEnv(fs *pflag.FlagSet, flag, env string) {
	f := fs.Lookup(flag)
	f.Usage += fmt.Sprintf(" (env %s)", env)
	_ = fs.SetAnnotation(flag, envAnnotation, []string{env})
}

// applyEnv fills every flag of cmd that was not set on the command line from
// its environment variable, if that is set.
func applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		envs := f.Annotations[envAnnotation]
		if err != nil || f.Changed || len(envs) == 0 {
			return
		}
		v, ok := getenv(cmd, envs[0])
		if !ok || v == "" {
			return
		}
		if setErr := f.Value.Set(v); setErr != nil {
			err = usagef("invalid %s: %v", envs[0], setErr)
		}
	})
	return err
}

// jobFlags are the flags every job binary (daily, weekly) takes.
type jobFlags struct {
	databaseURL     string
	asOf            string
	allowFutureAsOf bool
	dryRun          bool
	output          string
	failOnPartial   bool
	skipSend        bool
	sendReminder    bool
	batchSize       int
	concurrency     int
	shard           shardFlags
	delivery        deliveryFlags
	log             logFlags
	metrics         metricsFlags
	analytics       analyticsFlags
}

func (f *jobFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	registerDatabaseURL(fs, &f.databaseURL)
	fs.StringVar(&f.asOf, "as-of", "", "the instant the job treats as now, RFC3339 (default: the database clock)")
	bindEnv(fs, "as-of", "ENGAGEMENT_AS_OF")
	fs.BoolVar(&f.allowFutureAsOf, "allow-future-as-of", false, "accept an --as-of more than 5 minutes ahead of the database clock (a simulation: users are moved before their time)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "compute and report what would change; write nothing")
	fs.StringVar(&f.output, "output", "text", "summary format on stdout: text or json")
	fs.BoolVar(&f.failOnPartial, "fail-on-partial", false, "exit 3 when any user failed")
	fs.BoolVar(&f.skipSend, "skip-send", false, "do not run the trailing queue step")
	if cmd.Name() == scheduler.DailyJob {
		fs.BoolVar(&f.sendReminder, "send-reminder", false, `queue the reminder a "remind me later" promised as its user goes dormant (default: dormant silently)`)
		bindEnv(fs, "send-reminder", "ENGAGEMENT_SEND_REMINDER")
	}
	fs.IntVar(&f.batchSize, "batch-size", scheduler.DefaultBatchSize, "users moved per statement")
	fs.IntVar(&f.concurrency, "concurrency", scheduler.DefaultConcurrency, "batches run at once, each on its own connection")
	f.shard.register(fs)
	f.delivery.register(fs, queueStepGroup)
	f.log.register(fs)
	f.metrics.register(fs)
	f.analytics.register(fs)
}

// validate checks everything that can be checked before any work, parses
// --as-of (zero when not given) and resolves the shard.
func (f *jobFlags) validate(cmd *cobra.Command) (asOf time.Time, shard scheduler.Shard, err error) {
	if err := requireDatabaseURL(f.databaseURL); err != nil {
		return time.Time{}, shard, err
	}
	if err := validateOutput(f.output); err != nil {
		return time.Time{}, shard, err
	}
	if f.batchSize < 1 {
		return time.Time{}, shard, usagef("--batch-size must be at least 1, got %d", f.batchSize)
	}
	if f.concurrency < 1 || f.concurrency > 8 {
		return time.Time{}, shard, usagef("--concurrency must be from 1 to 8, got %d", f.concurrency)
	}
	if f.asOf != "" {
		if asOf, err = parseAsOf("--as-of (or ENGAGEMENT_AS_OF)", f.asOf); err != nil {
			return time.Time{}, shard, err
		}
	}
	if shard, err = f.shard.resolve(cmd); err != nil {
		return time.Time{}, shard, err
	}
	// The queue step's flags are checked even when the step does not run:
	// a value out of range is a mistake either way.
	if err := f.delivery.validate(); err != nil {
		return time.Time{}, shard, err
	}
	return asOf, shard, nil
}

func registerDatabaseURL(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "database-url", "", "PostgreSQL URL, e.g. postgres://user@host:5432/db")
	bindEnv(fs, "database-url", "DATABASE_URL")
}

// requireDatabaseURL checks that a database URL is given and parses, so a
// malformed one is a configuration error (exit 2, which a cron platform
// need not retry) found before any work. The message never shows the
// password.
func requireDatabaseURL(u string) error {
	if strings.TrimSpace(u) == "" {
		return usagef("no database: set DATABASE_URL or pass --database-url")
	}
	if _, err := pgx.ParseConfig(u); err != nil {
		return usageError(postgres.Redact(fmt.Errorf("invalid database URL: %w", err), u))
	}
	return nil
}

func validateOutput(o string) error {
	if o != "text" && o != "json" {
		return usagef("--output must be text or json, got %q", o)
	}
	return nil
}

// MaxAsOfSkew is how far ahead of the database clock --as-of may be
// without --allow-future-as-of: clock skew between hosts, not a date.
const MaxAsOfSkew = 5 * time.Minute

// minAsOf is the earliest --as-of accepted. Anything before it is a typo or
// a zero value (0001-01-01T00:00:00Z is Go's zero time, which would silently
// mean "the database clock"), never a day anyone wants to re-run.
var minAsOf = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// parseAsOf parses an RFC3339 instant no earlier than 2000-01-01; the job
// works in UTC. name is how the error names the input (the flag, and its
// environment variable where it has one).
func parseAsOf(name, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, usagef("%s %q is not an RFC3339 instant (like 2026-11-22T06:00:00Z)", name, s)
	}
	if t.Before(minAsOf) {
		return time.Time{}, usagef("%s %q is before %s; give the instant to treat as now (like 2026-11-22T06:00:00Z)", name, s, minAsOf.Format("2006-01-02"))
	}
	return t.UTC(), nil
}
