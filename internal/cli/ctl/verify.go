package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/pricing"
	"github.com/engagement-scheduler/engagement/retention"
	"github.com/engagement-scheduler/engagement/verify"
)

// verifyOptions is one engagementctl verify.
type verifyOptions struct {
	cli.CmdIO
	timeFlags
	cli.DBOptions
	keep time.Duration // cleanup's retention
	push cli.MetricsFlags

	rep   *verify.Report          // set by Run, for the push around it
	spend []metrics.SpendCategory // read by Run when pushing, for the push
}

func newVerifyCommand(databaseURL *string, runF func(*verifyOptions) error) *cobra.Command {
	o := &verifyOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the scheduler's invariants; exit 4 when one is broken",
		Long: `Checks, from one consistent snapshot, that:
  goodbye_queued       every goodbye_sent user the scheduler put there has its goodbye queued
  one_goodbye_per_day  no user has two goodbyes for one UTC day
  one_review_per_week  no user has two weekly reviews for one ISO week
  no_expired_claims    nothing is in flight whose holder's lease ran out
  transitions_allowed  every logged transition is in the state machine's table
  log_matches_state    each user's latest logged transition agrees with their state
  state_timestamps     goodbye_sent and remind_later users have the timestamps the daily job needs
  no_user_stuck        nobody is in a state a day past its deadline (the daily job would have moved them)
  instants_plausible   no user's last activity lies in the future, no reminder past its wait, no clock is infinite
  no_send_after_opt_out no message was sent more than 2m after its user's opt-out (and before an opt-in)
  no_goodbye_to_holdout no user held out of a goodbye (--holdout-percent) has that day's goodbye queued
  time_zones_usable    every user's timezone, when set, is one PostgreSQL can read
  data_api_closed      no table, sequence or function of the scheduler's is reachable by Supabase's Data API roles (anon, authenticated)
and prints a report of every check (--output json: one JSON object). Exits 0
when all hold, 4 when one is broken, 1 when the checks could not run.
--retention should match cleanup's --older-than: a goodbye older than that
may have been deleted, and is not required. Read-only in the database.
With --pushgateway-url (PUSHGATEWAY_URL) the outcome is pushed under job
engagementctl-verify (engagement_verify_ok, engagement_verify_violations
by check) for the alert in deploy/prometheus/alerts.yml.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	o.timeFlags.register(cmd)
	cmd.Flags().DurationVar(&o.keep, "retention", retention.DefaultRetention, "cleanup's retention (its --older-than)")
	o.push.Register(cmd.Flags())
	return cmd
}

func (o *verifyOptions) Validate() error {
	if o.keep <= 0 {
		return cli.Usagef("--retention must be positive, like 720h")
	}
	if err := o.push.Validate(); err != nil {
		return err
	}
	return o.timeFlags.validate(*o.DBURL)
}

var _ cli.Wrapper = (*verifyOptions)(nil)

// Around pushes the outcome of the run, however it ends, a database that
// did not open included.
func (o *verifyOptions) Around(ctx context.Context, run func(context.Context) error) (err error) {
	// Only a failed push is logged (a warning on stderr), with the run's
	// logger (cli.Main's: in the run's format, at its level, warn at least).
	log := *zerolog.Ctx(ctx)
	if log.GetLevel() < zerolog.WarnLevel {
		log = log.Level(zerolog.WarnLevel)
	}
	defer func(start time.Time) { pushVerify(ctx, &o.push, log, start, o.rep, o.spend, err) }(time.Now())
	return run(ctx)
}

// Run checks the invariants and prints the report; a broken invariant is
// exit 4.
func (o *verifyOptions) Run(ctx context.Context) error {
	rep, err := verify.Run(ctx, o.Pool, verify.Config{AsOf: o.asOf.Time(), Retention: o.keep})
	o.rep = rep
	if err != nil {
		return err
	}
	if o.push.Pushing() {
		// The spend rides on verify's push (a daily cron run), at the
		// shipped prices unless ENGAGEMENT_PRICES_FILE names others.
		o.spend = readSpend(ctx, o.Pool, o.asOf.Time())
	}
	if o.output == "json" {
		err = json.NewEncoder(o.Stdout).Encode(rep)
	} else {
		err = writeReport(o.Stdout, rep)
	}
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if !rep.OK {
		return &cli.ExitError{Code: cli.ExitInvariant, Err: fmt.Errorf("verify: %d of %d invariants broken: %s",
			len(rep.Broken), len(rep.Checks), strings.Join(rep.Broken, ", "))}
	}
	return nil
}

// pushVerify pushes the report. A report, broken invariants included, is a
// completed run; without one (rep nil) the checks could not run, err says
// why, and the run counts as failed.
func pushVerify(ctx context.Context, m *cli.MetricsFlags, log zerolog.Logger, start time.Time, rep *verify.Report,
	spend []metrics.SpendCategory, err error) {
	var pushed *metrics.Verify
	if rep != nil {
		err = nil
		pushed = &metrics.Verify{OK: rep.OK}
		for _, c := range rep.Checks {
			pushed.Checks = append(pushed.Checks, metrics.VerifyCheck{Name: c.Name, Violations: c.Violations})
		}
	}
	m.Push(ctx, log, start, metrics.Run{Job: metrics.VerifyJob, Verify: pushed, Spend: spend}, err)
}

// readSpend is the last 30 days' spend by category for the push, at the
// prices of ENGAGEMENT_PRICES_FILE (or the shipped ones); nil when it
// cannot be read, which the push then leaves out (verify's outcome is what
// the push is for).
func readSpend(ctx context.Context, db pricing.Querier, asOf time.Time) []metrics.SpendCategory {
	prices := pricing.Default()
	if f := os.Getenv("ENGAGEMENT_PRICES_FILE"); f != "" {
		p, err := pricing.Load(f)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Str("error", err.Error()).Msg("spend metric left out: the prices file cannot be read")
			return nil
		}
		prices = p
	}
	if asOf.IsZero() {
		asOf = time.Now()
	}
	sp, err := pricing.ReadSpend(ctx, db, asOf, prices)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Str("error", err.Error()).Msg("spend metric left out: reading the spend failed")
		return nil
	}
	out := make([]metrics.SpendCategory, 0, len(sp.Categories))
	for _, c := range sp.Categories {
		out = append(out, metrics.SpendCategory{Category: c.Category, Billable: c.Billable, USD: c.USD})
	}
	return out
}

// writeReport prints one line per check, then each broken check's examples.
func writeReport(w io.Writer, rep *verify.Report) error {
	fmt.Fprintf(w, "engagement invariants as of %s\n", rep.AsOf.Format(time.RFC3339))
	width := 0 // the longest check's name: the verdicts line up
	for _, c := range rep.Checks {
		width = max(width, len(c.Name))
	}
	for _, c := range rep.Checks {
		verdict := "ok"
		if !c.OK {
			verdict = fmt.Sprintf("FAILED (%d)", c.Violations)
		}
		exempt := ""
		if c.Exempt > 0 {
			exempt = fmt.Sprintf("  [%d exempt]", c.Exempt)
		}
		fmt.Fprintf(w, "%-*s %s%s\n", width, c.Name, verdict, exempt)
	}
	for _, c := range rep.Checks {
		if c.OK {
			continue
		}
		fmt.Fprintf(w, "\n%s: %s\n", c.Name, c.Rule)
		for _, e := range c.Examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
		if more := c.Violations - int64(len(c.Examples)); more > 0 {
			fmt.Fprintf(w, "  … and %d more\n", more)
		}
	}
	if rep.OK {
		_, err := fmt.Fprintln(w, "all invariants hold")
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d of %d invariants broken\n", len(rep.Broken), len(rep.Checks))
	return err
}
