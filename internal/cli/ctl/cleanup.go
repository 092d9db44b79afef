package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
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
--dry-run reports the counts and deletes nothing.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	o.timeFlags.register(cmd)
	fs := cmd.Flags()
	fs.DurationVar(&o.cfg.OlderThan, "older-than", retention.DefaultRetention, "retention: keep everything younger")
	fs.BoolVar(&o.cfg.DryRun, "dry-run", false, "count, delete nothing")
	fs.IntVar(&o.cfg.BatchSize, "batch-size", 5000, "rows deleted per statement")
	return cmd
}

func (o *cleanupOptions) Validate() error {
	if o.cfg.OlderThan <= 0 {
		return cli.Usagef("--older-than must be positive, like 720h")
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
	return err
}
