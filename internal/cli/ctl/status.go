package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/pricing"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/status"
)

// timeFlags are what status, verify, cleanup and seed share: the output format and the
// instant treated as now.
type timeFlags struct {
	asOf   cli.AsOfValue
	output string
}

func (f *timeFlags) register(cmd *cobra.Command) {
	f.registerAsOf(cmd, "", "the instant treated as now, RFC3339 (default: the database clock)")
}

// registerAsOf registers the flags with asOf as --as-of's default and usage
// as its help.
func (f *timeFlags) registerAsOf(cmd *cobra.Command, asOf, usage string) {
	fs := cmd.Flags()
	if asOf != "" {
		if err := f.asOf.Set(asOf); err != nil {
			panic("ctl: the default --as-of " + asOf + ": " + err.Error())
		}
	}
	fs.Var(&f.asOf, "as-of", usage)
	fs.StringVar(&f.output, "output", "text", "text or json")
}

// validate checks the flags and the database URL they go with.
func (f *timeFlags) validate(databaseURL string) error {
	if err := cli.RequireDatabaseURL(databaseURL); err != nil {
		return err
	}
	if err := cli.ValidateOutput(f.output); err != nil {
		return err
	}
	return f.asOf.Check()
}

// statusOptions is one engagementctl status.
type statusOptions struct {
	cli.CmdIO
	timeFlags
	cli.DBOptions
	runs       int
	pricesFile string
	prices     *pricing.Prices
}

func newStatusCommand(databaseURL *string, runF func(*statusOptions) error) *cobra.Command {
	o := &statusOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the queue, users by state and the latest job runs",
		Long: `Shows, from one consistent snapshot: queued messages by status and type,
how many pending messages are due and how long the oldest has waited,
in-flight claims past their deadline, users by state (with opt-outs), each
transport's send budget (used, what waits on it, when its line clears),
what Meta bills for the last 30 days' messages (a message is billed when
it is delivered; a failed one never; those sent through the webhook or the
log cost Meta nothing) and what the next 7 days' goodbyes would cost, and
the latest --runs runs of each job and shard with their outcome and
counters. --output json prints the same as one JSON object. Read-only.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	o.timeFlags.register(cmd)
	cmd.Flags().IntVar(&o.runs, "runs", status.DefaultRuns, "latest runs shown per job and shard")
	cmd.Flags().StringVar(&o.pricesFile, "prices-file", "", "Meta's prices per country and category, JSON (docs/console.md, What it costs); default: the shipped, dated prices for Brazil")
	cliflag.BindEnv(cmd.Flags(), "prices-file", "ENGAGEMENT_PRICES_FILE")
	return cmd
}

func (o *statusOptions) Validate() error {
	if o.runs < 1 {
		return cli.Usagef("--runs must be at least 1, got %d", o.runs)
	}
	if o.pricesFile != "" {
		p, err := pricing.Load(o.pricesFile)
		if err != nil {
			return cli.UsageError(fmt.Errorf("--prices-file: %w", err))
		}
		o.prices = p
	}
	return o.timeFlags.validate(*o.DBURL)
}

func (o *statusOptions) Run(ctx context.Context) error {
	st, err := status.ReadWith(ctx, o.Pool, status.Options{AsOf: o.asOf.Time(), RunsPerJob: o.runs, Prices: o.prices})
	if err != nil {
		return err
	}
	if o.output == "json" {
		return json.NewEncoder(o.Stdout).Encode(st)
	}
	return writeStatus(o.Stdout, st)
}

// writeStatus prints the status: the queue, the spend, the users, the runs.
func writeStatus(w io.Writer, st *status.Status) error {
	fmt.Fprintf(w, "engagement status as of %s\n\n", st.AsOf.Format(time.RFC3339))

	if err := writeQueue(w, st.Queue); err != nil {
		return err
	}
	writePauses(w, st.Pauses)
	writeBudgets(w, st.AsOf, st.Budgets)
	writeProtection(w, st.QueueSettings, st.NumberHealth)
	fmt.Fprintln(w)

	if err := writeSpend(w, st.Spend); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	f := st.SpendForecast
	cost := "not priced"
	if f.USD != nil {
		cost = usd(*f.USD)
	}
	fmt.Fprintf(w, "the next %d days' goodbyes: %d, %s (%s)\n\n", f.Days, f.Goodbyes, cost, f.Assumption)

	if err := writeUsers(w, st.Users); err != nil {
		return err
	}
	return writeRuns(w, st.RunsPerJob, st.Runs)
}

// writeQueue prints the queue: one row per message type, one column per
// status, then what is due, stuck or cancelled.
func writeQueue(w io.Writer, q status.Queue) error {
	statuses := sm.MessageStatuses()
	var types []string
	counts := map[[2]string]int64{}
	for _, c := range q.Counts {
		if !slices.Contains(types, c.MessageType) {
			types = append(types, c.MessageType)
		}
		if !slices.Contains(statuses, c.Status) {
			statuses = append(statuses, c.Status)
		}
		counts[[2]string{c.MessageType, c.Status}] = c.Messages
	}
	slices.Sort(types)
	fmt.Fprintf(w, "queue: %d messages\n", q.Total)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "type\t")
	for _, s := range statuses {
		fmt.Fprintf(tw, "%s\t", s)
	}
	fmt.Fprintln(tw, "total\t")
	queueRow := func(name string, typ func(string) bool) {
		fmt.Fprintf(tw, "%s\t", name)
		var total int64
		for _, s := range statuses {
			var n int64
			for k, c := range counts {
				if k[1] == s && typ(k[0]) {
					n += c
				}
			}
			total += n
			fmt.Fprintf(tw, "%d\t", n)
		}
		fmt.Fprintf(tw, "%d\t\n", total)
	}
	for _, t := range types {
		queueRow(t, func(x string) bool { return x == t })
	}
	queueRow("total", func(string) bool { return true })
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if q.OldestDuePendingAt != nil {
		age := time.Duration(*q.OldestDuePendingAgeSeconds) * time.Second
		fmt.Fprintf(w, "due now: %d pending; the oldest waits since %s (%s)\n",
			q.DuePending, q.OldestDuePendingAt.Format(time.RFC3339), age)
	} else {
		fmt.Fprintln(w, "due now: nothing pending is due")
	}
	fmt.Fprintf(w, "in flight past the claim deadline: %d\n", q.ExpiredClaims)
	fmt.Fprintf(w, "receipts kept for a send not recorded yet: %d\n", q.KeptReceipts)
	reasons := make([]string, 0, len(q.CancelledByReason))
	for _, r := range q.CancelledByReason {
		reasons = append(reasons, fmt.Sprintf("%s %d", r.Reason, r.Messages))
	}
	fmt.Fprintf(w, "cancelled by reason: %s\n", strings.Join(reasons, ", "))
	return nil
}

// writeUsers prints the users by state, with how many of each opted out.
func writeUsers(w io.Writer, u status.Users) error {
	fmt.Fprintf(w, "users: %d (%d opted out)\n", u.Total, u.OptedOut)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "state\tusers\topted_out\t")
	for _, s := range u.ByState {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", s.State, s.Users, s.OptedOut)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t\n", u.Total, u.OptedOut)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if n := u.UnusableTimeZones; n > 0 {
		fmt.Fprintf(w, "time zones PostgreSQL cannot read: %d users (quiet hours use --timezone for them; verify names them)\n", n)
	}
	return nil
}

// writeRuns prints each job's latest runs, a row each, then the error of
// each run that has one, on a line of its own.
func writeRuns(w io.Writer, perJob int, runs []status.Run) error {
	fmt.Fprintf(w, "\nruns: the latest %d per job and shard\n", perJob)
	if len(runs) == 0 {
		fmt.Fprintln(w, "no job has run yet")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "id\tjob\tshard\tas_of\tstarted\ttook\tstatus\tprocessed\tsucceeded\tfailed\tskipped\tqueued\tduplicates\tsent/retried/failed\t")
	var errs []status.Run
	for _, r := range runs {
		shard, took := "-", "-"
		if r.Shard != "" {
			shard = r.Shard
		}
		if r.FinishedAt != nil {
			took = r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t", r.ID, r.Job, shard,
			r.AsOf.Format(time.RFC3339), r.StartedAt.Format(time.RFC3339), took, r.Status)
		if c := r.Counters; c != nil {
			delivery := "-"
			if d := c.Delivery; d != nil {
				delivery = fmt.Sprintf("%d/%d/%d", d.Sent, d.Retried, d.Failed)
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", c.Processed, c.Succeeded, c.Failed, c.Skipped, c.Queued, c.Duplicates, delivery)
		} else {
			fmt.Fprint(tw, "-\t-\t-\t-\t-\t-\t-\t\n")
		}
		if r.Error != "" {
			errs = append(errs, r)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	for _, r := range errs {
		fmt.Fprintf(w, "run %d (%s): %s\n", r.ID, r.Status, cli.OneLine(r.Error))
	}
	return nil
}

// writePauses writes a line per transport paused now, with what to do.
func writePauses(w io.Writer, pauses []delivery.Pause) {
	for _, p := range pauses {
		until := "until cleared"
		if p.Until != nil {
			until = "until " + p.Until.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "PAUSED: %s, the account refused (%s) since %s, %s\n  what to do: %s\n",
			p.Transport, p.Kind, p.Since.UTC().Format(time.RFC3339), until, p.Advice)
	}
}

// writeBudgets writes a line per send budget: what the window holds, what
// waits on it, and when the line clears at this rate.
func writeBudgets(w io.Writer, now time.Time, budgets []delivery.BudgetReport) {
	if len(budgets) == 0 {
		fmt.Fprintln(w, "send budget: none (queue-process --daily-limit)")
		return
	}
	for _, b := range budgets {
		limit := fmt.Sprintf("%d a day", b.Limit)
		if b.RampDay != nil {
			limit = fmt.Sprintf("%d today, day %d of the ramp %s up to %d", b.Limit, *b.RampDay+1, b.Ramp, b.DailyLimit)
		}
		fmt.Fprintf(w, "send budget on %s: %d recipients in the last 24 h of %s", b.Transport, b.Used, limit)
		if b.NextSlotAt != nil {
			fmt.Fprintf(w, "; full, the next slot frees at %s", b.NextSlotAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(w, "\n  waiting on it: %d messages", b.Waiting)
		if b.ClearsAt != nil {
			fmt.Fprintf(w, "; at this rate the last goes at %s (%s)", b.ClearsAt.UTC().Format(time.RFC3339), days(b.ClearsAt.Sub(now)))
		}
		fmt.Fprintln(w)
	}
}

// writeProtection writes what the last queue-process run on each
// transport ran with (the order, the per-user cap, the pace) and Meta's
// verdict on the Cloud API number, when any was recorded.
func writeProtection(w io.Writer, settings []delivery.QueueSettings, numbers []delivery.NumberReport) {
	for _, s := range settings {
		fmt.Fprintf(w, "queue-process on %s (as of %s): order %s\n  per-user cap: %s\n  pace: %s\n",
			s.Transport, s.RecordedAt.UTC().Format(time.RFC3339), s.Order(), s.Cap(), s.Pace())
	}
	for _, n := range numbers {
		read := "never read"
		if n.ReadAt != nil {
			read = "read " + n.ReadAt.UTC().Format(time.RFC3339) + " from " + n.Source
		}
		fmt.Fprintf(w, "number on %s: %s (%s)\n", n.Transport, n.Health(), read)
	}
}

// days says how far off d is, in days when it is a day or more.
func days(d time.Duration) string {
	if d < 24*time.Hour {
		return "in " + d.Round(time.Minute).String()
	}
	n := int(math.Ceil(d.Hours() / 24))
	return fmt.Sprintf("in %d days", n)
}
