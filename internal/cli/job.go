package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/migrations"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/sender"
)

// jobFunc is a job's entry point in package scheduler.
type jobFunc func(context.Context, *pgxpool.Pool, scheduler.Config) (*scheduler.Summary, error)

// NewDailyCommand builds the engagement-daily command.
func NewDailyCommand() *cobra.Command {
	return newJobCommand(scheduler.DailyJob, scheduler.RunDaily,
		"Move inactive users through the engagement state machine",
		`Runs the daily engagement steps, in order:

  inactivity_14d   active or help_flow users silent for 14 days get a goodbye
                   queued -> goodbye_sent
  goodbye_timeout  goodbyes unanswered 48 h after they were delivered -> dormant;
                   a goodbye that failed or was cancelled -> active again
  reminder_due     remind_later users whose remind_at has come -> dormant
                   (with --send-reminder, their reminder is queued)

Opted-out users are never messaged; their timers complete silently.
Re-running is always safe: a second run of the same day changes nothing.
Re-run a missed day with --as-of.`)
}

// NewWeeklyCommand builds the engagement-weekly command.
func NewWeeklyCommand() *cobra.Command {
	return newJobCommand(scheduler.WeeklyJob, scheduler.RunWeekly,
		"Queue a weekly review for every user active in the last 7 days",
		`Queues one celebratory weekly review (engagement.weekly_review.celebration,
params {"count":"<transactions in the 7 days>"}) for every user in state
active or help_flow with a transaction or bot activity in the 7 days up to
the as-of instant. One review per user per ISO week: re-running the same
week queues nothing and counts the reviews already queued as duplicates.
States are not changed; opted-out users are never touched.`)
}

func newJobCommand(name string, job jobFunc, short, long string) *cobra.Command {
	var f jobFlags
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			asOf, shard, err := f.validate(cmd)
			if err != nil {
				return err
			}
			if err := f.metrics.validate(); err != nil {
				return err
			}
			log, err := f.log.logger(cmd.ErrOrStderr(), name)
			if err != nil {
				return err
			}
			// The trailing queue step runs only with a transport; its
			// configuration is checked before any work, like the rest.
			var delivery *sender.ProcessorConfig
			if f.delivery.transport != "" && !f.skipSend && !f.dryRun {
				cfg, err := f.delivery.processorConfig(cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				cfg.Logger = log
				delivery = &cfg
			}
			return runJobCommand(cmd.Context(), cmd.OutOrStdout(), log, name, job, f, asOf, shard, delivery)
		}),
	}
	f.register(cmd)
	cmd.SetUsageFunc(groupedUsage)
	return cmd
}

func runJobCommand(ctx context.Context, stdout io.Writer, log zerolog.Logger, name string, job jobFunc, f jobFlags, asOf time.Time, shard scheduler.Shard, delivery *sender.ProcessorConfig) (err error) {
	// The run's metrics are pushed however it ends, a failure included.
	var sum *scheduler.Summary
	defer func(start time.Time) { f.metrics.pushJob(ctx, log, name, shard, start, f.dryRun, sum, err) }(time.Now())
	ctx = log.WithContext(ctx) // the pool logs server warnings with it
	pool, err := openChecked(ctx, f.databaseURL, name)
	if err != nil {
		return err
	}
	defer pool.Close()
	var dbNow time.Time
	if err := pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		return postgres.Redact(fmt.Errorf("read the database clock: %w", err), f.databaseURL)
	}
	switch {
	case asOf.IsZero():
		asOf = dbNow
	case asOf.After(dbNow.Add(MaxAsOfSkew)) && !f.allowFutureAsOf:
		// A future as-of acts on users before their time: a 2030 dry run
		// would have queued goodbyes to 4 users in 10.
		return usagef("--as-of %s is %s ahead of the database clock (%s): the job would act on users before their time; pass --allow-future-as-of to simulate the future on purpose",
			asOf.Format(time.RFC3339), asOf.Sub(dbNow).Round(time.Second), dbNow.UTC().Format(time.RFC3339))
	}

	sum, runErr := job(ctx, pool, scheduler.Config{
		AsOf:         asOf,
		DryRun:       f.dryRun,
		BatchSize:    f.batchSize,
		Concurrency:  f.concurrency,
		Shard:        shard,
		SendReminder: f.sendReminder,
		Logger:       log,
	})
	if runErr != nil {
		return postgres.Redact(runErr, f.databaseURL)
	}
	// The run's batches have committed: report them (with an API key only;
	// bounded, and never an error of the job's).
	publishAnalytics(ctx, pool, log, sum, f)
	delivered, err := sendQueued(ctx, pool, log, sum, delivery, f)
	if err != nil {
		return postgres.Redact(err, f.databaseURL)
	}
	if err := writeSummary(stdout, f.output, sum); err != nil {
		return err
	}
	if f.failOnPartial && (sum.Partial() || delivered.Failed > 0) {
		return errPartial
	}
	return nil
}

// sendQueued is the jobs' trailing queue step: with a transport (and no
// --skip-send) it delivers what is due, as queue-process would; without one
// the messages wait for queue-process.
func sendQueued(ctx context.Context, pool *pgxpool.Pool, log zerolog.Logger, sum *scheduler.Summary, delivery *sender.ProcessorConfig, f jobFlags) (sender.ProcessSummary, error) {
	switch {
	case f.dryRun:
		return sender.ProcessSummary{}, nil
	case delivery == nil:
		if !f.skipSend && sum.Queued > 0 {
			log.Info().Int("queued", sum.Queued).Msg("no transport configured: messages wait for queue-process to deliver them")
		}
		return sender.ProcessSummary{}, nil
	}
	if err := f.delivery.attachDedupe(delivery, pool, log); err != nil {
		return sender.ProcessSummary{}, err
	}
	p, err := sender.NewProcessor(pool, *delivery)
	if err != nil {
		return sender.ProcessSummary{}, err
	}
	delivered, err := p.Run(ctx)
	if err != nil {
		return delivered, fmt.Errorf("queue step: %w", err)
	}
	log.Info().Str("transport", delivered.Transport).Int("processed", delivered.Processed).Int("sent", delivered.Sent).
		Int("retried", delivered.Retried).Int("failed", delivered.Failed).Msg("queue step finished")
	sum.Delivery = &delivered
	return delivered, nil
}

// openChecked opens the pool and checks the schema is migrated.
func openChecked(ctx context.Context, databaseURL, app string) (*pgxpool.Pool, error) {
	pool, err := postgres.Open(ctx, databaseURL, app)
	if err != nil {
		return nil, err
	}
	if err := migrations.Check(ctx, pool); err != nil {
		pool.Close()
		return nil, postgres.Redact(err, databaseURL)
	}
	return pool, nil
}

// writeSummary prints the summary: exactly one JSON object with --output
// json, a small table otherwise.
func writeSummary(w io.Writer, format string, sum *scheduler.Summary) error {
	if format == "json" {
		if err := json.NewEncoder(w).Encode(sum); err != nil {
			return fmt.Errorf("write summary: %w", err)
		}
		return nil
	}
	title := fmt.Sprintf("%s as of %s", sum.Job, sum.AsOf.Format(time.RFC3339))
	if sum.ISOWeek != "" {
		title += " (" + sum.ISOWeek + ")"
	}
	if sum.Shard != "" {
		title += ", shard " + sum.Shard
	}
	if sum.DryRun {
		title += " — dry run, nothing written"
	} else if sum.RunID != 0 {
		title += fmt.Sprintf(" — run %d", sum.RunID)
	}
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tprocessed\tsucceeded\tfailed\tskipped\tqueued\tduplicates\t")
	row := func(name string, c scheduler.Counts) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, c.Processed, c.Succeeded, c.Failed, c.Skipped, c.Queued, c.Duplicates)
	}
	for _, st := range sum.Steps {
		row(st.Name, st.Counts)
	}
	row("total", sum.Counts)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	for _, reason := range slices.Sorted(maps.Keys(sum.SkipReasons)) {
		fmt.Fprintf(w, "skipped %s: %d\n", reason, sum.SkipReasons[reason])
	}
	for _, e := range sum.Errors {
		fmt.Fprintf(w, "failed %s (%s): %s\n", e.UserID, e.Step, e.Error)
	}
	if sum.ErrorsTruncated {
		fmt.Fprintf(w, "… %d failures in all; the log lists each\n", sum.Failed)
	}
	if d := sum.Delivery; d != nil {
		fmt.Fprintf(w, "queue step via %s: %d sent, %d retried, %d failed\n", d.Transport, d.Sent, d.Retried, d.Failed)
	}
	fmt.Fprintf(w, "took %s\n", (time.Duration(sum.DurationMS) * time.Millisecond).String())
	return nil
}
