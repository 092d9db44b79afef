package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/retention"
)

// cleanupOptions is one engagementctl cleanup.
type cleanupOptions struct {
	cli.CmdIO
	timeFlags
	cli.DBOptions
	cfg retention.CleanupConfig
}

func newCleanupCommand(databaseURL *string, runF func(*cleanupOptions) error) *cobra.Command {
	o := &cleanupOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}}
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Delete settled messages and ledger rows past the retention",
		Long: `Deletes, in batches, sent, failed and cancelled messages queued more than
--older-than ago, with their send-ledger rows. Pending and in-flight messages
are never touched, and neither is any message whose idempotency key a job
could still produce by a re-run with an --as-of inside the retention window:
a goodbye is kept until its day, a weekly review until its ISO week, a
reminder until its instant, is older than the cutoff. Re-running a day older
than the retention window is therefore not protected against duplicates.

Two logs age out by horizons of their own, each user's latest row of
either kept whatever its age: the state transition log
(--transitions-older-than, default 400 days; at least 120, what the
console's funnel reads: 12 weekly cohorts and the 30 days after each) and
the consent events (--consent-older-than, default 5 years: the history of a
person's marketing consent, LGPD; a user's latest event is the record of
their standing choice and stays as long as the user). 0 keeps that log
whole. --dry-run reports the counts and deletes nothing.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	o.timeFlags.register(cmd)
	fs := cmd.Flags()
	fs.DurationVar(&o.cfg.OlderThan, "older-than", retention.DefaultRetention, "retention: keep everything younger")
	fs.BoolVar(&o.cfg.DryRun, "dry-run", false, "count, delete nothing")
	fs.IntVar(&o.cfg.BatchSize, "batch-size", 5000, "rows deleted per statement")
	fs.DurationVar(&o.cfg.TransitionsOlderThan, "transitions-older-than", retention.DefaultTransitionRetention,
		"the state transition log's horizon: keep younger rows and each user's latest (0: keep all; else at least 2880h)")
	cliflag.BindEnv(fs, "transitions-older-than", "ENGAGEMENT_TRANSITIONS_RETENTION")
	fs.DurationVar(&o.cfg.ConsentOlderThan, "consent-older-than", retention.DefaultConsentRetention,
		"the consent events' horizon: keep younger events and each user's latest (0: keep all)")
	cliflag.BindEnv(fs, "consent-older-than", "ENGAGEMENT_CONSENT_RETENTION")
	return cmd
}

func (o *cleanupOptions) Validate() error {
	if o.cfg.OlderThan <= 0 {
		return cli.Usagef("--older-than must be positive, like 720h")
	}
	if h := o.cfg.TransitionsOlderThan; h < 0 || (h > 0 && h < retention.MinTransitionRetention) {
		return cli.Usagef("--transitions-older-than (or ENGAGEMENT_TRANSITIONS_RETENTION) must be 0 (keep all) or at least %s "+
			"(120 days: the funnel reads 12 weeks and 30 days after), got %s", retention.MinTransitionRetention, h)
	}
	if o.cfg.ConsentOlderThan < 0 {
		return cli.Usagef("--consent-older-than (or ENGAGEMENT_CONSENT_RETENTION) must be 0 (keep all) or positive, got %s", o.cfg.ConsentOlderThan)
	}
	if o.cfg.BatchSize < 1 {
		return cli.Usagef("--batch-size must be at least 1")
	}
	return o.timeFlags.validate(*o.DBURL)
}

func (o *cleanupOptions) Run(ctx context.Context) error {
	cfg := o.cfg
	var err error
	if cfg.AsOf, err = postgres.AsOf(ctx, o.Pool, o.asOf.Time()); err != nil {
		return err
	}
	sum, err := retention.Cleanup(ctx, o.Pool, cfg)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return json.NewEncoder(o.Stdout).Encode(sum)
	}
	verb := "deleted"
	if sum.DryRun {
		verb = "would delete"
	}
	_, err = fmt.Fprintf(o.Stdout, "cleanup before %s: %s %d messages, %d ledger rows, %d expired idempotency keys and %d bot request keys\n",
		sum.Cutoff.Format(time.RFC3339), verb, sum.Messages, sum.Ledger, sum.IdempotencyKeys, sum.FireRequests)
	if err == nil && sum.TransitionsCutoff != nil {
		_, err = fmt.Fprintf(o.Stdout, "transition log before %s: %s %d rows (each user's latest kept)\n",
			sum.TransitionsCutoff.Format(time.RFC3339), verb, sum.Transitions)
	}
	if err == nil && sum.ConsentCutoff != nil {
		_, err = fmt.Fprintf(o.Stdout, "consent events before %s: %s %d (each user's latest kept)\n",
			sum.ConsentCutoff.Format(time.RFC3339), verb, sum.ConsentEvents)
	}
	if err == nil {
		_, err = fmt.Fprintf(o.Stdout, "receipts kept a week for a send that never came: %s %d\n", verb, sum.KeptReceipts)
	}
	return err
}
