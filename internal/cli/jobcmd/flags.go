package jobcmd

import (
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// jobFlags are the flags every job binary (daily, weekly) takes, as given
// (the environment applied); jobOptions.Validate checks them.
type jobFlags struct {
	databaseURL     string
	asOf            cli.AsOfValue
	allowFutureAsOf bool
	dryRun          bool
	output          string
	failOnPartial   bool
	skipSend        bool
	sendReminder    bool
	holdoutPercent  float64
	holdoutSalt     string
	bestHourFlags   bestHourFlags
	batchSize       int
	concurrency     int
	shard           shardFlags
	delivery        queuecmd.DeliveryFlags
	log             cli.LogFlags
	metrics         cli.MetricsFlags
	analytics       analyticsFlags
}

func (f *jobFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	cli.RegisterDatabaseURL(fs, &f.databaseURL)
	f.asOf.Name = "--as-of (or ENGAGEMENT_AS_OF)"
	fs.Var(&f.asOf, "as-of", "the instant the job treats as now, RFC3339 (default: the database clock)")
	cliflag.BindEnv(fs, "as-of", "ENGAGEMENT_AS_OF")
	fs.BoolVar(&f.allowFutureAsOf, "allow-future-as-of", false, "accept an --as-of more than 5 minutes ahead of the database clock (a simulation: users are moved before their time)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "compute and report what would change; write nothing")
	fs.StringVar(&f.output, "output", "text", "summary format on stdout: text or json")
	fs.BoolVar(&f.failOnPartial, "fail-on-partial", false, "exit 3 when any user failed")
	fs.BoolVar(&f.skipSend, "skip-send", false, "do not run the trailing queue step")
	if cmd.Name() == scheduler.DailyJob {
		fs.BoolVar(&f.sendReminder, "send-reminder", false, `queue the reminder a "remind me later" promised as its user goes dormant (default: dormant silently)`)
		cliflag.BindEnv(fs, "send-reminder", "ENGAGEMENT_SEND_REMINDER")
		fs.Float64Var(&f.holdoutPercent, "holdout-percent", 0, "hold out this percent (0-100) of the users due a goodbye as a control group: same move, no message (docs/holdout.md)")
		cliflag.BindEnv(fs, "holdout-percent", "ENGAGEMENT_HOLDOUT_PERCENT")
		fs.StringVar(&f.holdoutSalt, "holdout-salt", scheduler.DefaultHoldoutSalt, "mixed into the hash that picks the held-out users; a new salt draws a new group")
		cliflag.BindEnv(fs, "holdout-salt", "ENGAGEMENT_HOLDOUT_SALT")
		f.bestHourFlags.register(fs)
	}
	fs.IntVar(&f.batchSize, "batch-size", scheduler.DefaultBatchSize, "users moved per statement")
	fs.IntVar(&f.concurrency, "concurrency", scheduler.DefaultConcurrency, "batches run at once, each on its own connection")
	f.shard.register(fs)
	f.delivery.Register(fs, queuecmd.QueueStepGroup)
	f.log.Register(fs)
	f.metrics.Register(fs)
	f.analytics.register(fs)
}
