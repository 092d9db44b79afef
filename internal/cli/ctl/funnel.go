package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/funnel"
	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/pricing"
)

// funnelOptions is one engagementctl funnel.
type funnelOptions struct {
	cli.CmdIO
	timeFlags
	cli.DBOptions
	weeks      int
	pricesFile string
	prices     *pricing.Prices
}

func newFunnelCommand(databaseURL *string, runF func(*funnelOptions) error) *cobra.Command {
	o := &funnelOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}}
	cmd := &cobra.Command{
		Use:   "funnel",
		Short: "Compare the goodbye's arms: treated and held-out users who wrote again within 30 days",
		Long: `Shows, per weekly cohort of goodbyes (ISO weeks, UTC) and pooled over the
--weeks up to --as-of, the users of each arm (treatment: sent a goodbye;
holdout: held out by engagement-daily --holdout-percent) and how many wrote
again within 30 days, each arm's rate, the difference with its 95 %
confidence interval (Newcombe's hybrid score interval) and a plain verdict.
A cohort younger than 30 days is still counting, and left out of the
totals, which pool the cohorts that held someone out. --output json prints
one object: a "cohorts" array, each with "treatment" and "holdout" objects
("users", "reactivated", "rate") and its "lift"; the totals beside it.
When engagement-daily ran with --best-hour-percent, the treated users'
timing arms follow, per cohort and pooled ("timing": "best_hour" and
"run_time", each with "users", "answered_48h" and "reactivated"; the
"lift" of best hour over run time, and the "answered_lift"). Below the arms, what Meta billed for the 30 days to --as-of, as status
shows it ("spend" in the JSON; --prices-file prices it). docs/holdout.md
says how to read it. Read-only.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	o.timeFlags.register(cmd)
	cmd.Flags().IntVar(&o.weeks, "weeks", funnel.DefaultWeeks, "ISO weeks of cohorts, up to --as-of's, that the totals pool")
	cmd.Flags().StringVar(&o.pricesFile, "prices-file", "", "Meta's prices per country and category, JSON (docs/console.md, What it costs); default: the shipped, dated prices for Brazil")
	cliflag.BindEnv(cmd.Flags(), "prices-file", "ENGAGEMENT_PRICES_FILE")
	return cmd
}

func (o *funnelOptions) Validate() error {
	if o.weeks < 1 || o.weeks > 520 {
		return cli.Usagef("--weeks must be from 1 to 520, got %d", o.weeks)
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

func (o *funnelOptions) Run(ctx context.Context) error {
	rep, err := funnel.Read(ctx, o.Pool, funnel.Options{AsOf: o.asOf.Time(), Weeks: o.weeks})
	if err != nil {
		return err
	}
	spend, err := pricing.ReadSpend(ctx, o.Pool, rep.AsOf, o.prices)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return json.NewEncoder(o.Stdout).Encode(funnelReport{Report: rep, Spend: spend})
	}
	if err := writeFunnel(o.Stdout, rep); err != nil {
		return err
	}
	fmt.Fprintln(o.Stdout)
	return writeSpend(o.Stdout, spend)
}

// funnelReport is funnel --output json: the report's keys, and "spend",
// what Meta billed for the 30 days to --as-of (status's "spend").
type funnelReport struct {
	*funnel.Report
	Spend pricing.Spend `json:"spend"`
}

// writeFunnel prints the arms by cohort, then the totals and the verdict.
func writeFunnel(w io.Writer, rep *funnel.Report) error {
	fmt.Fprintf(w, "the goodbye's arms as of %s, %d weeks, reactivated = wrote again within %d days\n\n",
		rep.AsOf.Format(time.RFC3339), rep.Weeks, rep.WindowDays)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "week of\ttreated\treactivated\trate\theld out\treactivated\trate\tdifference\t95% CI\t")
	row := func(name string, t, h funnel.Arm, l funnel.Lift) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%s\t", name, t.Users, t.Reactivated, pct(t), h.Users, h.Reactivated, pct(h))
		if l.Known {
			fmt.Fprintf(tw, "%+.1f\t%+.1f to %+.1f\t\n", 100*l.Difference, 100*l.Low, 100*l.High)
		} else {
			fmt.Fprint(tw, "-\t-\t\n")
		}
	}
	for _, c := range rep.Cohorts {
		name := c.WeekStart.Format(time.DateOnly)
		if c.StillCounting {
			name += "*"
		}
		row(name, c.Treatment, c.Holdout, c.Lift)
	}
	row(fmt.Sprintf("pooled (%d)", rep.PooledCohorts), rep.Treatment, rep.Holdout, rep.Lift)
	for _, v := range rep.Variants {
		name := "  variant " + v.Name
		if v.Name == "" {
			name = "  no variant"
		}
		row(name, v.Arm, rep.Holdout, v.Lift)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write funnel: %w", err)
	}
	if rep.StillCounting > 0 {
		fmt.Fprintf(w, "* still counting: %d users' goodbyes are younger than %d days, not in the totals\n", rep.StillCounting, rep.WindowDays)
	}
	fmt.Fprintf(w, "\n%s\n(%s)\n", rep.Lift.Verdict, rep.Method)
	return writeTiming(w, rep)
}

// writeTiming prints the timing arms by cohort and pooled, and their
// verdicts: nothing when no goodbye recorded a timing.
func writeTiming(w io.Writer, rep *funnel.Report) error {
	if rep.Timing == nil {
		return nil
	}
	fmt.Fprintf(w, "\nthe goodbye's timing (engagement-daily --best-hour-percent), treated users: answered within %.0f h of the send, reactivated within %d days\n\n",
		funnel.AnswerWindow.Hours(), rep.WindowDays)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "week of\tarm\tusers\tanswered\trate\treactivated\trate\t")
	arm := func(name, label string, a funnel.TimingArm) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\t%s\t\n", name, label, a.Users, a.Answered48h, share(a.Answered48h, a.Users),
			a.Reactivated, share(a.Reactivated, a.Users))
	}
	diff := func(l funnel.TimingLift) string {
		if !l.Known {
			return "-"
		}
		return fmt.Sprintf("%+.1f (%+.1f to %+.1f)", 100*l.Difference, 100*l.Low, 100*l.High)
	}
	rows := func(name string, t *funnel.Timing) {
		arm(name, "best hour", t.BestHour)
		arm("", "run time", t.RunTime)
		fmt.Fprintf(tw, "\tdifference, 95%% CI\t\t\t%s\t\t%s\t\n", diff(t.AnsweredLift), diff(t.Lift))
	}
	for _, c := range rep.Cohorts {
		if c.Timing == nil {
			continue
		}
		name := c.WeekStart.Format(time.DateOnly)
		if c.StillCounting {
			name += "*"
		}
		rows(name, c.Timing)
	}
	rows(fmt.Sprintf("pooled (%d)", rep.Timing.PooledCohorts), rep.Timing)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write funnel: %w", err)
	}
	fmt.Fprintf(w, "\nreactivated: %s\nanswered: %s\n", rep.Timing.Lift.Verdict, rep.Timing.AnsweredLift.Verdict)
	return nil
}

// pct is an arm's rate in percent, "-" without users.
func pct(a funnel.Arm) string { return share(a.Reactivated, a.Users) }

// share is n of users in percent, "-" without users.
func share(n, users int64) string {
	if users == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(users))
}
