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
whole.

Two more tables age out by horizons of their own, after the messages: the
console's audit log (--audit-older-than, default 5 years, at least 1: an
audit trail, as long as the consent events it records operators' changes
to) and the job runs (--runs-older-than, default 90 days, at least 7),
never a run still going, one a queued message or a logged transition still
names (it goes once they have), or one of the latest 100 of its job and
shard (what the console's runs page lists). 0 keeps that table whole.
--dry-run reports the counts and deletes nothing.`,
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
	fs.DurationVar(&o.cfg.AuditOlderThan, "audit-older-than", retention.DefaultAuditRetention,
		"the console audit log's horizon: keep younger rows (0: keep all; else at least 8760h)")
	cliflag.BindEnv(fs, "audit-older-than", "ENGAGEMENT_AUDIT_RETENTION")
	fs.DurationVar(&o.cfg.RunsOlderThan, "runs-older-than", retention.DefaultRunRetention,
		"the job runs' horizon: keep younger runs, running, named and each job's latest 100 (0: keep all; else at least 168h)")
	cliflag.BindEnv(fs, "runs-older-than", "ENGAGEMENT_RUNS_RETENTION")
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
	if h := o.cfg.AuditOlderThan; h < 0 || (h > 0 && h < retention.MinAuditRetention) {
		return cli.Usagef("--audit-older-than (or ENGAGEMENT_AUDIT_RETENTION) must be 0 (keep all) or at least %s "+
			"(a year: an audit trail), got %s", retention.MinAuditRetention, h)
	}
	if h := o.cfg.RunsOlderThan; h < 0 || (h > 0 && h < retention.MinRunRetention) {
		return cli.Usagef("--runs-older-than (or ENGAGEMENT_RUNS_RETENTION) must be 0 (keep all) or at least %s, got %s",
			retention.MinRunRetention, h)
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
	if err == nil && sum.AuditCutoff != nil {
		_, err = fmt.Fprintf(o.Stdout, "console audit log before %s: %s %d rows\n", sum.AuditCutoff.Format(time.RFC3339), verb, sum.AuditRows)
	}
	if err == nil && sum.RunsCutoff != nil {
		_, err = fmt.Fprintf(o.Stdout, "job runs before %s: %s %d (running, named and each job's latest %d kept)\n",
			sum.RunsCutoff.Format(time.RFC3339), verb, sum.JobRuns, retention.KeepRuns)
	}
	return err
}
