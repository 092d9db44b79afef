package jobcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// jobFunc is a job's entry point in package scheduler.
type jobFunc func(context.Context, *pgxpool.Pool, scheduler.Config) (*scheduler.Summary, error)

// NewDailyCommand builds the engagement-daily command.
func NewDailyCommand() *cobra.Command {
	return newJobCommand(scheduler.DailyJob, scheduler.RunDaily,
		"Move inactive users through the engagement state machine",
		"Runs the daily engagement steps, one per timer of the state machine, in order:\n\n"+
			"  "+strings.Join(scheduler.DailySteps(), "\n  ")+`

A goodbye that failed for good or was cancelled moves its user back to
active instead (goodbye_undelivered): they are never timed out on a goodbye
they did not get. Opted-out users are never messaged; their timers complete
silently. Re-running is always safe: a second run of the same day changes
nothing. Re-run a missed day with --as-of. SIGTERM or SIGINT stops the run:
the batches in hand finish, the summary says "stopped", the run is
recorded stopped and the exit code is 0; the next run does the rest.`)
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
States are not changed; opted-out users are never touched. SIGTERM or
SIGINT stops the run as it stops engagement-daily: the batches in hand
finish, the summary says "stopped", exit 0; the next run does the rest.`)
}

func newJobCommand(name string, job jobFunc, short, long string) *cobra.Command {
	o := &jobOptions{name: name, job: job}
	o.DBURL = &o.databaseURL
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE:  cli.RunOptions(o, nil),
	}
	o.register(cmd)
	o.secrets = cli.SecretsOf(cmd) // the flags' values, read when the run logs an error
	cmd.SetUsageFunc(cli.GroupedUsage)
	return cmd
}

// jobOptions is one run of a job binary: its flags, and what Validate
// makes of them. Run reads nothing else.
type jobOptions struct {
	jobFlags
	name string
	job  jobFunc
	cli.CmdIO
	cli.DBOptions
	secrets cli.Secrets // scrubbed from the errors it logs; cli.Main scrubs the one it ends with

	// Set by Validate.
	variants map[string][]sender.Variant // the catalog's copy variants, by message type
	shard    scheduler.Shard
	log      zerolog.Logger
	delivery *delivery.ProcessorConfig // the queue step's; nil: no queue step

	sum *scheduler.Summary // set by Run, for the metrics around it
	// summarized is set once Run wrote the summary.
	summarized bool
}

// Validate checks everything that can be checked before any work (a usage
// error, exit 2, naming the flag) and resolves the shard, the logger and
// the queue step's configuration.
func (o *jobOptions) Validate() error {
	if err := cli.RequireDatabaseURL(o.databaseURL); err != nil {
		return err
	}
	if err := cli.ValidateOutput(o.output); err != nil {
		return err
	}
	if o.batchSize < 1 {
		return cli.Usagef("--batch-size must be at least 1, got %d", o.batchSize)
	}
	if o.concurrency < 1 || o.concurrency > 8 {
		return cli.Usagef("--concurrency must be from 1 to 8, got %d", o.concurrency)
	}
	if err := o.asOf.Check(); err != nil {
		return err
	}
	if err := o.holdout().Validate(); err != nil {
		return cli.Usagef("--holdout-percent (or ENGAGEMENT_HOLDOUT_PERCENT): %v", err)
	}
	if err := o.validateBestHour(); err != nil {
		return err
	}
	if o.name == scheduler.DailyJob && strings.TrimSpace(o.holdoutSalt) == "" {
		return cli.Usagef("--holdout-salt (or ENGAGEMENT_HOLDOUT_SALT) must not be empty")
	}
	var err error
	if o.shard, err = o.jobFlags.shard.resolve(); err != nil {
		return err
	}
	// The queue step's flags are checked even when the step does not run:
	// a value out of range is a mistake either way.
	if err := o.jobFlags.delivery.Validate(); err != nil {
		return err
	}
	// The catalog's copy variants decide which text each user's goodbye
	// is, whether or not this run delivers it.
	catalog, err := o.jobFlags.delivery.Catalog()
	if err != nil {
		return err
	}
	goodbye := string(sm.GoodbyeMessage)
	o.variants = map[string][]sender.Variant{goodbye: catalog.Variants(goodbye)}
	if err := o.metrics.Validate(); err != nil {
		return err
	}
	if o.log, err = o.jobFlags.log.Logger(o.Stderr, o.name); err != nil {
		return err
	}
	if o.jobFlags.delivery.Transport() != "" && !o.skipSend && !o.dryRun {
		cfg, err := o.jobFlags.delivery.ProcessorConfig(o.Stderr)
		if err != nil {
			return err
		}
		cfg.Logger = o.log
		o.delivery = &cfg
	}
	return nil
}

var _ cli.Wrapper = (*jobOptions)(nil)

// Around runs the job with the job's logger in its context (the pool logs
// server warnings with it) and pushes the metrics, however the run ends,
// a database that did not open included.
//
// A job told to stop (SIGINT, SIGTERM) exits 0 with its summary at any
// moment of its life, as queue-process does: a stop while it still
// connects, checks the schema or waits for another run of the job is a
// run that stopped before it did anything ("stopped": "shutdown", no run
// recorded), not a failure (issue 55: exit 1, "connect to database:
// context canceled").
func (o *jobOptions) Around(ctx context.Context, run func(context.Context) error) (err error) {
	start := time.Now()
	defer func() { o.pushMetrics(ctx, start, err) }()
	err = run(o.log.WithContext(ctx))
	// Only an error the stop caused: any other (a usage error, a
	// constraint the database refused) stays the run's, stop or not.
	if err == nil || ctx.Err() == nil || o.summarized || !errors.Is(err, context.Canceled) {
		return err
	}
	o.log.Info().Str("reason", err.Error()).Msg(o.name + " told to stop before it started; nothing done, the next run does it")
	sum := o.sum
	if sum == nil {
		// No run began: the instant is --as-of's, or this machine's clock
		// (the database's was not read).
		asOf := o.asOf.Time()
		if asOf.IsZero() {
			asOf = start.UTC().Truncate(time.Second)
		}
		sum = &scheduler.Summary{Job: o.name, AsOf: asOf, DryRun: o.dryRun, Steps: scheduler.Steps{}, Errors: []scheduler.UserError{}}
		if o.shard.Sharded() {
			sum.Shard = o.shard.String()
		}
	}
	sum.Stopped = scheduler.StoppedShutdown
	sum.DurationMS = time.Since(start).Milliseconds()
	o.sum = sum
	return writeSummary(o.Stdout, o.output, sum)
}

// pushMetrics pushes the run's metrics, its summary and its queue step's;
// a dry run pushes none. See cli.MetricsFlags.Push.
func (o *jobOptions) pushMetrics(ctx context.Context, start time.Time, err error) {
	if !o.metrics.Pushing() {
		return
	}
	if o.dryRun {
		o.log.Info().Msg("dry run: no metrics pushed")
		return
	}
	// A stopped run is no failure and no success (metrics.Run.Stopped).
	r := metrics.Run{Job: o.name, Summary: o.sum, Stopped: o.sum != nil && o.sum.Stopped != ""}
	if o.shard.Sharded() {
		r.Shard = o.shard.String()
	}
	if o.sum != nil {
		r.Delivery = o.sum.Delivery
	}
	o.metrics.Push(ctx, o.log, start, r, err)
}

// Run runs the job, its analytics and its queue step, and writes the
// summary.
func (o *jobOptions) Run(ctx context.Context) error {
	pool := o.Pool
	asOf, now, err := o.resolveAsOf(ctx, pool)
	if err != nil {
		return err
	}
	if o.delivery != nil {
		// The queue step reads what is due and the send budget's window as
		// of the run, as queue-process --as-of does: an --as-of ahead of
		// the database clock is a simulation of that instant (one behind
		// it, a replay of a past day, sends now).
		o.delivery.ClockOffset = max(asOf.Sub(now), 0)
	}
	sum, err := o.job(ctx, pool, scheduler.Config{
		AsOf:         asOf,
		DryRun:       o.dryRun,
		BatchSize:    o.batchSize,
		Concurrency:  o.concurrency,
		Shard:        o.shard,
		SendReminder: o.sendReminder,
		Holdout:      o.holdout(),
		BestHour:     o.bestHour(),
		Variants:     o.variants,
		Logger:       o.log,
	})
	o.sum = sum
	if err != nil {
		return err
	}
	// The run's batches have committed: report them (with an API key only;
	// bounded, and never an error of the job's), those of a stopped run
	// too: the next run reports only its own.
	pubCtx := ctx
	if sum.Stopped != "" {
		pubCtx = context.WithoutCancel(ctx)
	}
	o.analytics.publish(pubCtx, pool, o.log, sum, o.secrets)
	var delivered delivery.ProcessSummary
	switch {
	case sum.Stopped != "":
		if o.delivery != nil {
			o.log.Info().Msg("told to stop: no queue step; queue-process or the next run delivers what was queued")
		}
	default:
		// Told to stop in the queue step, it stops as queue-process does
		// (its summary, under "delivery", says so); the job's own work is
		// done, and its run stays recorded as such.
		if delivered, err = o.sendQueued(ctx, pool, sum); err != nil {
			return err
		}
	}
	if err := writeSummary(o.Stdout, o.output, sum); err != nil {
		return err
	}
	o.summarized = true
	if o.failOnPartial && (sum.Partial() || delivered.Failed > 0) {
		return cli.ErrPartial
	}
	return nil
}

// holdout is the goodbye's control group the flags ask for (the daily job's
// alone: the weekly job has no such flags, and holds out nobody).
func (o *jobOptions) holdout() scheduler.Holdout {
	return scheduler.Holdout{Percent: o.holdoutPercent, Salt: o.holdoutSalt}
}

// resolveAsOf is --as-of, or the database clock without it, and the
// database clock. A future --as-of acts on users before their time (a 2030
// dry run would have queued goodbyes to 4 users in 10), so one more than
// cli.MaxAsOfSkew ahead of the database clock needs --allow-future-as-of.
func (o *jobOptions) resolveAsOf(ctx context.Context, db postgres.Querier) (asOf, now time.Time, err error) {
	now, err = postgres.Now(ctx, db)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	asOf = o.asOf.Time()
	switch {
	case asOf.IsZero():
		return now, now, nil
	case asOf.After(now.Add(cli.MaxAsOfSkew)) && !o.allowFutureAsOf:
		return time.Time{}, time.Time{}, cli.Usagef("--as-of %s is %s ahead of the database clock (%s): the job would act on users before their time; pass --allow-future-as-of to simulate the future on purpose",
			asOf.Format(time.RFC3339), asOf.Sub(now).Round(time.Second), now.UTC().Format(time.RFC3339))
	}
	return asOf, now, nil
}

// sendQueued is the jobs' trailing queue step: with a transport (and no
// --skip-send) it delivers what is due, as queue-process would; without one
// the messages wait for queue-process.
func (o *jobOptions) sendQueued(ctx context.Context, pool *pgxpool.Pool, sum *scheduler.Summary) (delivery.ProcessSummary, error) {
	log, cfg := o.log, o.delivery
	switch {
	case o.dryRun:
		return delivery.ProcessSummary{}, nil
	case cfg == nil:
		if !o.skipSend && sum.Queued > 0 {
			log.Info().Int("queued", sum.Queued).Msg("no transport configured: messages wait for queue-process to deliver them")
		}
		return delivery.ProcessSummary{}, nil
	}
	if err := o.jobFlags.delivery.AttachDedupe(cfg, pool, log); err != nil {
		return delivery.ProcessSummary{}, err
	}
	p, err := delivery.NewProcessor(pool, *cfg)
	if err != nil {
		return delivery.ProcessSummary{}, err
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
	if sum.Stopped != "" {
		fmt.Fprintf(w, "stopped: %s (told to stop); the next run does the rest\n", sum.Stopped)
	}
	fmt.Fprintf(w, "took %s\n", (time.Duration(sum.DurationMS) * time.Millisecond).String())
	return nil
}
