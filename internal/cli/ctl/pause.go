package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli"
)

// pauseOptions is one engagementctl pause list or pause clear.
type pauseOptions struct {
	cli.CmdIO
	cli.DBOptions
	clear     bool
	output    string
	transport string
	actor     string
}

const pauseLong = `When the bot answers that WhatsApp refuses its whole account (an
account_error: reachout_timelock, rate_overlimit, logged_out or banned),
queue-process pauses the transport: no process claims or sends through it
until the pause ends (retry_after_s; logged_out and banned have no end of
their own), and the messages wait, pending (docs/delivery.md, "The
account is refused").`

func newPauseCommand(databaseURL *string, runF func(*pauseOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pause",
		Short: "The transports' account pauses: list, clear",
		Long:  pauseLong,
		Args:  cobra.NoArgs,
		RunE:  missingSubcommand,
	}
	list := &pauseOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}}
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List each transport's last pause, active or not, and what to do",
		Long:  pauseLong + "\n\nExit 0; 1 when the database fails.",
		Args:  cobra.NoArgs,
		RunE:  cli.RunOptions(list, runF),
	}
	listCmd.Flags().StringVar(&list.output, "output", "text", "text or json")

	clear := &pauseOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}, clear: true}
	clearCmd := &cobra.Command{
		Use:   "clear",
		Short: "End a transport's pause now: its next queue-process run sends",
		Long: pauseLong + `

Clear a pause once its cause is gone (the device re-linked, the ban lifted):
the next queue-process run sends again, and a new refusal pauses again.
Exit 0 (also when no pause was active); 2 for a bad --transport; 1 when the
database fails.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(clear, runF),
	}
	clearCmd.Flags().StringVar(&clear.transport, "transport", "webhook", "the transport whose pause to clear")
	registerActor(clearCmd, &clear.actor, "the operator recorded as clearing it")
	cmd.AddCommand(listCmd, clearCmd)
	return cmd
}

// transportName is what a transport's name may be.
var transportName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

func (o *pauseOptions) Validate() error {
	if err := cli.RequireDatabaseURL(*o.DBURL); err != nil {
		return err
	}
	if !o.clear {
		return cli.ValidateOutput(o.output)
	}
	if !transportName.MatchString(o.transport) {
		return cli.Usagef("--transport %q: want a transport's name, such as webhook", o.transport)
	}
	o.actor = strings.TrimSpace(o.actor)
	if o.actor == "" {
		o.actor = defaultActor
	}
	return nil
}

func (o *pauseOptions) Run(ctx context.Context) error {
	if o.clear {
		kind, err := delivery.ClearPause(ctx, o.Pool, o.transport, o.actor)
		if err != nil {
			return err
		}
		what := "no active pause to clear"
		if kind != "" {
			what = "pause (" + kind + ") cleared: the next queue-process run sends"
		}
		_, err = fmt.Fprintf(o.Stdout, "%s: %s\n", o.transport, what)
		return err
	}
	pauses, err := delivery.ReadPauses(ctx, o.Pool)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return json.NewEncoder(o.Stdout).Encode(struct {
			Pauses []delivery.Pause `json:"pauses"`
		}{append([]delivery.Pause{}, pauses...)})
	}
	tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSPORT\tKIND\tSTATE\tSINCE\tUNTIL\tWHAT TO DO")
	for _, p := range pauses {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Transport, p.Kind, pauseState(p),
			p.Since.UTC().Format(time.RFC3339), pauseUntil(p), p.Advice)
	}
	return tw.Flush()
}

// pauseState says whether p is active, cleared or over.
func pauseState(p delivery.Pause) string {
	switch {
	case p.Active:
		return "active"
	case p.ClearedAt != nil:
		return "cleared"
	}
	return "ended"
}

// pauseUntil is p's end, or that it has none.
func pauseUntil(p delivery.Pause) string {
	if p.Until == nil {
		return "until cleared"
	}
	return p.Until.UTC().Format(time.RFC3339)
}
