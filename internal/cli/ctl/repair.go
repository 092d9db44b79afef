package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/repair"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// repairFlags are what requeue and cancel share, and what Validate makes
// of them.
type repairFlags struct {
	cli.DBOptions
	dryRun bool
	output string
	logs   cli.LogFlags

	log zerolog.Logger // set by validate
}

func (f *repairFlags) register(cmd *cobra.Command, verb string) {
	fs := cmd.Flags()
	fs.BoolVar(&f.dryRun, "dry-run", false, "count what would be "+verb+"; change nothing")
	fs.StringVar(&f.output, "output", "text", "text or json")
	f.logs.Register(fs)
}

// validate checks the shared flags and makes the audit logger.
func (f *repairFlags) validate(stderr io.Writer) error {
	if err := cli.RequireDatabaseURL(*f.DBURL); err != nil {
		return err
	}
	if err := cli.ValidateOutput(f.output); err != nil {
		return err
	}
	var err error
	f.log, err = f.logs.Logger(stderr, "engagementctl")
	return err
}

// filterError turns the sender's bad-filter errors into usage errors (exit 2).
func filterError(err error) error {
	if errors.Is(err, repair.ErrBadFilter) {
		return cli.UsageError(errors.New(strings.TrimPrefix(err.Error(), repair.ErrBadFilter.Error()+": ")))
	}
	return err
}

// parseInstant parses an optional RFC3339 flag value; zero when empty.
func parseInstant(flag, s string) (time.Time, error) {
	if strings.TrimSpace(s) == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, cli.Usagef("%s %q is not an RFC3339 instant (like 2026-03-02T06:00:00Z)", flag, s)
	}
	return t.UTC(), nil
}

// requeueOptions is one engagementctl requeue.
type requeueOptions struct {
	cli.CmdIO
	repairFlags
	filter       repair.RequeueFilter
	since, until string
}

func newRequeueCommand(databaseURL *string, runF func(*requeueOptions) error) *cobra.Command {
	o := &requeueOptions{repairFlags: repairFlags{DBOptions: cli.DBOptions{DBURL: databaseURL}}}
	cmd := &cobra.Command{
		Use:   "requeue",
		Short: "Put failed (or cancelled) messages back in the queue, same id and idempotency key",
		Long: `Puts the failed messages (--status cancelled: the cancelled ones) that match
every filter given back to pending, due now, with retry count 0 and no error
or cancel reason. Each keeps its id and idempotency key, so a receiver that
de-duplicates by key drops one it already has: after a receiver outage,
requeued messages are delivered once, under the key they first carried.
Without filters, every message in --status is requeued.

--since (inclusive) and --until (exclusive) select by when a message
settled: its last attempt in the send ledger or, when no attempt came after
it was due (a message cancelled at claim time), when it came due.

One statement, safe while queue-process runs: only messages still in
--status change; one in flight is never touched. --dry-run counts and
changes nothing. A message requeued on a transport that cannot de-duplicate
(whatsapp-cloud) whose outcome was unknown may reach the user twice: filter
those out with --error-contains, or check them first. See docs/repair.md.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	fs := cmd.Flags()
	fs.StringVar(&o.filter.Status, "status", sm.StatusFailed, "which messages to requeue: failed or cancelled")
	fs.StringVar(&o.filter.Type, "type", "", "only this message type, e.g. goodbye")
	fs.StringVar(&o.since, "since", "", "only messages that settled at or after this instant, RFC3339")
	fs.StringVar(&o.until, "until", "", "only messages that settled before this instant, RFC3339")
	fs.StringSliceVar(&o.filter.IDs, "ids", nil, "only these message ids (UUIDs, comma-separated or repeated)")
	fs.StringVar(&o.filter.ErrorContains, "error-contains", "", "only messages whose error contains this text (any case)")
	fs.StringVar(&o.filter.ErrorGroup, "error-group", "", "only messages of this reason group, exactly as the console's queue page names it")
	fs.StringVar(&o.filter.Reason, "reason", "", "with --status cancelled: only this cancel reason ("+strings.Join(sm.CancelReasons(), ", ")+")")
	o.repairFlags.register(cmd, "requeued")
	return cmd
}

func (o *requeueOptions) Validate() error {
	f := &o.filter
	var err error
	if f.Since, err = parseInstant("--since", o.since); err != nil {
		return err
	}
	if f.Until, err = parseInstant("--until", o.until); err != nil {
		return err
	}
	f.Type, f.Reason = strings.TrimSpace(f.Type), strings.TrimSpace(f.Reason)
	if err := filterError(f.Validate()); err != nil {
		return err
	}
	return o.repairFlags.validate(o.Stderr)
}

func (o *requeueOptions) Run(ctx context.Context) error {
	f := o.filter
	audit := map[string]any{"status": f.Status, "type": f.Type, "reason": f.Reason, "ids": len(f.IDs),
		"error_contains": f.ErrorContains, "error_group": f.ErrorGroup, "since": o.since, "until": o.until}
	return o.run(ctx, o.Stdout, "requeue", audit, func(pool postgres.Querier) (int64, error) {
		return repair.Requeue(ctx, pool, f, o.dryRun)
	}, func(n int64) any {
		return struct {
			Status   string `json:"status"`
			Requeued int64  `json:"requeued"`
			DryRun   bool   `json:"dry_run"`
		}{f.Status, n, o.dryRun}
	}, func(n int64) string {
		if o.dryRun {
			return fmt.Sprintf("would requeue %d %s messages (dry run: nothing changed)", n, f.Status)
		}
		return fmt.Sprintf("requeued %d %s messages", n, f.Status)
	})
}

// cancelOptions is one engagementctl cancel.
type cancelOptions struct {
	cli.CmdIO
	repairFlags
	filter repair.CancelFilter
}

func newCancelCommand(databaseURL *string, runF func(*cancelOptions) error) *cobra.Command {
	o := &cancelOptions{repairFlags: repairFlags{DBOptions: cli.DBOptions{DBURL: databaseURL}}}
	cmd := &cobra.Command{
		Use:   "cancel",
		Short: "Cancel pending messages (reason operator) by id, user, type or key",
		Long: `Cancels the pending messages that match every filter given: status
cancelled, cancel reason operator. Each keeps its idempotency key, so a
re-run of the job that queued it does not queue it again; engagementctl
requeue --status cancelled --reason operator undoes it. Refuses to run
without a filter unless --all.

One statement, safe while queue-process runs: a message in flight (claimed
by a queue-process, status processing) is never touched; it is being sent.
--dry-run counts and changes nothing. See docs/repair.md.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&o.filter.IDs, "ids", nil, "only these message ids (UUIDs, comma-separated or repeated)")
	fs.StringVar(&o.filter.UserID, "user-id", "", "only this user's messages (UUID)")
	fs.StringVar(&o.filter.Type, "type", "", "only this message type, e.g. weekly_review")
	fs.StringVar(&o.filter.Key, "key", "", "only the message with this idempotency key")
	fs.BoolVar(&o.filter.All, "all", false, "cancel every pending message (no other filter allowed)")
	o.repairFlags.register(cmd, "cancelled")
	return cmd
}

func (o *cancelOptions) Validate() error {
	if err := filterError(o.filter.Validate()); err != nil {
		return err
	}
	return o.repairFlags.validate(o.Stderr)
}

func (o *cancelOptions) Run(ctx context.Context) error {
	f := o.filter
	audit := map[string]any{"user_id": f.UserID, "type": f.Type, "idempotency_key": f.Key, "ids": len(f.IDs), "all": f.All}
	return o.run(ctx, o.Stdout, "cancel", audit, func(pool postgres.Querier) (int64, error) {
		return repair.Cancel(ctx, pool, f, o.dryRun)
	}, func(n int64) any {
		return struct {
			Cancelled int64 `json:"cancelled"`
			DryRun    bool  `json:"dry_run"`
		}{n, o.dryRun}
	}, func(n int64) string {
		if o.dryRun {
			return fmt.Sprintf("would cancel %d pending messages (dry run: nothing changed)", n)
		}
		return fmt.Sprintf("cancelled %d pending messages", n)
	})
}

// run runs one repair statement on the pool the runner opened, logs one
// line with the filter and the count (an audit trail on stderr; the filter
// holds ids and keys, never message texts or JIDs) and writes the count as
// text or JSON.
func (f *repairFlags) run(ctx context.Context, stdout io.Writer, command string, filter map[string]any,
	work func(postgres.Querier) (int64, error), asJSON func(int64) any, asText func(int64) string,
) error {
	n, err := work(f.Pool)
	if err != nil {
		return err
	}
	f.log.Info().Str("command", command).Fields(filter).Int64("messages", n).Bool("dry_run", f.dryRun).Msg("repair done")
	if f.output == "json" {
		return json.NewEncoder(stdout).Encode(asJSON(n))
	}
	_, err = fmt.Fprintln(stdout, asText(n))
	return err
}
