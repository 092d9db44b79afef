package queuecmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// NewCommand builds the queue-process command.
func NewCommand() *cobra.Command { return newCommand(nil) }

// newCommand builds queue-process; runF, when not nil, replaces the
// run (see cli.RunOptions).
func newCommand(runF func(*queueOptions) error) *cobra.Command {
	o := &queueOptions{}
	o.DBURL = &o.databaseURL
	cmd := &cobra.Command{
		Use:   "queue-process",
		Short: "Deliver due queued messages through a transport",
		Long: `Claims due pending messages (any number of queue-process instances can run at
once), renders each in the user's locale, and delivers it through one
transport, the one --transport names:

` + transportList() + `

Failures are retried with exponential backoff; the pace holds across every
running process. SIGTERM stops claiming, finishes the send in flight and
releases the rest.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	fs := cmd.Flags()
	cli.RegisterDatabaseURL(fs, &o.databaseURL)
	fs.StringVar(&o.output, "output", "text", "summary format on stdout: text or json")
	fs.BoolVar(&o.failOnPartial, "fail-on-partial", false, "exit 3 when any message failed")
	o.asOf.Name = "--as-of (or ENGAGEMENT_AS_OF)"
	fs.Var(&o.asOf, "as-of", "simulate a later instant, RFC3339: what is due and the send budget's window are read as of it (needs --allow-future-as-of; default: the database clock)")
	cliflag.BindEnv(fs, "as-of", "ENGAGEMENT_AS_OF")
	fs.BoolVar(&o.allowFutureAsOf, "allow-future-as-of", false, "accept an --as-of ahead of the database clock (a simulation: messages go before their time)")
	o.delivery.Register(fs, deliveryGroup)
	o.logs.Register(fs)
	o.metrics.Register(fs)
	o.secrets = cli.SecretsOf(cmd)
	cmd.SetUsageFunc(cli.GroupedUsage)
	return cmd
}

// queueOptions is one run of queue-process: its flags, and what Validate
// makes of them. Run reads nothing else.
type queueOptions struct {
	databaseURL     string
	output          string
	failOnPartial   bool
	asOf            cli.AsOfValue
	allowFutureAsOf bool
	delivery        DeliveryFlags
	logs            cli.LogFlags
	metrics         cli.MetricsFlags
	cli.CmdIO
	cli.DBOptions
	secrets cli.Secrets // scrubbed from the error the run's row records

	// Set by Validate.
	log zerolog.Logger
	cfg delivery.ProcessorConfig

	sum     delivery.ProcessSummary // set by Run, for the metrics around it
	backlog *metrics.Queue          // the backlog Run left, when metrics are pushed
	// summarized is set once Run wrote the summary.
	summarized bool
}

// Validate checks every flag before any work (a usage error, exit 2) and
// builds the processor's configuration.
func (o *queueOptions) Validate() error {
	if err := cli.RequireDatabaseURL(o.databaseURL); err != nil {
		return err
	}
	if err := cli.ValidateOutput(o.output); err != nil {
		return err
	}
	if err := o.asOf.Check(); err != nil {
		return err
	}
	if err := o.metrics.Validate(); err != nil {
		return err
	}
	if err := o.delivery.Validate(); err != nil {
		return err
	}
	var err error
	if o.log, err = o.logs.Logger(o.Stderr, "queue-process"); err != nil {
		return err
	}
	if o.cfg, err = o.delivery.ProcessorConfig(o.Stderr); err != nil {
		return err
	}
	o.cfg.Logger = o.log
	return nil
}

var _ cli.Wrapper = (*queueOptions)(nil)

// Around runs queue-process with its logger in the run's context (the
// pool logs server warnings with it) and pushes the metrics, however the
// run ends, a database that did not open included.
//
// A run told to stop (SIGINT, SIGTERM) exits 0 with its summary at any
// moment of its life: a stop while it still connects, checks the schema
// or records its run is a run that stopped before it delivered anything
// ("stopped": "shutdown"), not a failure (issue 42: exit 1, "connect to
// database: context canceled", no summary).
func (o *queueOptions) Around(ctx context.Context, run func(context.Context) error) (err error) {
	ctx = o.log.WithContext(ctx)
	start := time.Now()
	defer func() { o.pushMetrics(ctx, start, err) }()
	err = run(ctx)
	if err != nil && ctx.Err() != nil && !o.summarized {
		o.log.Info().Err(err).Msg("queue-process told to stop before it delivered anything")
		sum := o.sum
		sum.Job = delivery.Job
		if sum.Transport == "" && o.cfg.Transport != nil {
			sum.Transport = o.cfg.Transport.Name()
		}
		sum.Stopped = "shutdown"
		sum.DurationMS = time.Since(start).Milliseconds()
		o.sum = sum
		return writeSummary(o.Stdout, o.output, sum)
	}
	return err
}

// Run delivers what is due and writes the summary.
func (o *queueOptions) Run(ctx context.Context) (err error) {
	pool := o.Pool
	if err := o.delivery.AttachDedupe(&o.cfg, pool, o.log); err != nil {
		return err
	}
	if o.cfg.ClockOffset, err = o.clockOffset(ctx, pool); err != nil {
		return err
	}
	p, err := delivery.NewProcessor(pool, o.cfg)
	if err != nil {
		return err
	}
	rec, err := scheduler.RecordRun(ctx, pool, delivery.Job, o.runAsOf(), 0, o.log)
	if err != nil {
		return err
	}
	o.log.Info().Str("transport", o.cfg.Transport.Name()).Int64("run_id", rec.ID()).Msg("queue-process started")
	sum, err := p.Run(ctx)
	sum.RunID = rec.ID()
	// The run's row says what it did however it ended (an error's text
	// without the secret flags' values).
	if finishErr := rec.Finish(ctx, sum, sum.Failed > 0, o.secrets.Scrub(err)); err == nil {
		err = finishErr
	}
	o.sum = sum
	o.readBacklog(ctx, pool)
	if err != nil {
		return err
	}
	o.log.Info().Int("processed", sum.Processed).Int("sent", sum.Sent).Int("retried", sum.Retried).
		Int("failed", sum.Failed).Int("cancelled", sum.Cancelled).Int("deferred", sum.Deferred).
		Int("deferred_budget", sum.DeferReasons[sm.DeferredBudget]).
		Int64("duration_ms", sum.DurationMS).Msg("queue-process finished")
	if err := writeSummary(o.Stdout, o.output, sum); err != nil {
		return err
	}
	o.summarized = true
	if o.failOnPartial && sum.Failed > 0 {
		return cli.ErrPartial
	}
	return nil
}

// pushMetrics pushes the run's metrics, its summary and the backlog it
// left; see cli.MetricsFlags.Push.
func (o *queueOptions) pushMetrics(ctx context.Context, start time.Time, err error) {
	sum := o.sum
	o.metrics.Push(ctx, o.log, start, metrics.Run{Job: "queue-process", Delivery: &sum, Queue: o.backlog}, err)
}

// readBacklog reads the backlog the run leaves, for pushMetrics, when
// metrics are pushed at all. A failed read is a warning: the gauges are
// left out of the push and the run's outcome stands.
func (o *queueOptions) readBacklog(ctx context.Context, db metrics.Querier) {
	if !o.metrics.Pushing() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metrics.DefaultPushTimeout)
	defer cancel()
	q, err := metrics.ReadQueue(ctx, db)
	if err != nil {
		o.log.Warn().Err(err).Msg("could not read the queue backlog; its gauges are not pushed")
		return
	}
	o.backlog = &q
}

// runAsOf is the run's as-of for its engagement_job_runs row: --as-of, or
// nil for the database clock.
func (o *queueOptions) runAsOf() *time.Time {
	if t := o.asOf.Time(); !t.IsZero() {
		return &t
	}
	return nil
}

// clockOffset is how far --as-of is ahead of the database clock: 0
// without it. queue-process sends now, so an --as-of is only a simulation
// of a later instant: one in the past is refused, and one more than
// cli.MaxAsOfSkew ahead needs --allow-future-as-of, as for the jobs.
func (o *queueOptions) clockOffset(ctx context.Context, db *pgxpool.Pool) (time.Duration, error) {
	asOf := o.asOf.Time()
	if asOf.IsZero() {
		return 0, nil
	}
	now, err := postgres.Now(ctx, db)
	if err != nil {
		return 0, err
	}
	switch ahead := asOf.Sub(now); {
	case ahead < -cli.MaxAsOfSkew:
		return 0, cli.Usagef("--as-of %s is before the database clock (%s): queue-process sends now, and can only simulate a later instant",
			asOf.Format(time.RFC3339), now.Format(time.RFC3339))
	case ahead > cli.MaxAsOfSkew && !o.allowFutureAsOf:
		return 0, cli.Usagef("--as-of %s is %s ahead of the database clock (%s): messages would go before their time; pass --allow-future-as-of to simulate the future on purpose",
			asOf.Format(time.RFC3339), ahead.Round(time.Second), now.Format(time.RFC3339))
	default:
		return max(ahead, 0), nil
	}
}

func writeSummary(w io.Writer, format string, sum delivery.ProcessSummary) error {
	var err error
	if format == "json" {
		err = json.NewEncoder(w).Encode(sum)
	} else {
		_, err = fmt.Fprintf(w, "queue-process via %s: %d processed, %d sent, %d retried, %d failed, %d cancelled, %d deferred in %s\n",
			sum.Transport, sum.Processed, sum.Sent, sum.Retried, sum.Failed, sum.Cancelled, sum.Deferred,
			time.Duration(sum.DurationMS)*time.Millisecond)
		if tp := sum.Throughput; err == nil && tp != nil && tp.RateLimited > 0 {
			_, err = fmt.Fprintf(w, "throughput: Meta said 130429 (over the number's throughput) %d times; the run slowed from %d to %.0f messages a second\n",
				tp.RateLimited, tp.CeilingMPS, tp.RateMPS)
		}
		if b := sum.Budget; err == nil && b != nil {
			next := ""
			if b.NextSlotAt != nil {
				next = ", next slot at " + b.NextSlotAt.Format(time.RFC3339)
			}
			_, err = fmt.Fprintf(w, "send budget: %d of %d recipients in the last 24 h, %d messages waiting on it%s\n",
				b.Used, b.Limit, b.Waiting, next)
		}
		if p := sum.Pause; err == nil && p != nil {
			until := "until it is cleared (engagementctl pause clear)"
			if p.Until != nil {
				until = "until " + p.Until.Format(time.RFC3339)
			}
			_, err = fmt.Fprintf(w, "paused: the bot says WhatsApp refuses the account (%s); nothing is sent %s. What to do: %s\n",
				p.Kind, until, p.Advice)
		}
	}
	if err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
