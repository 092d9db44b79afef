package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// categoriesOptions is one engagementctl categories (list), categories set
// or categories unset.
type categoriesOptions struct {
	cli.CmdIO
	cli.DBOptions
	action string // "list", "set" or "unset"
	output string
	actor  string
}

const categoriesLong = `Every message type has a Meta category, and every door (the jobs,
engagementctl enqueue, POST /api/messages, the console, the bot's SQL)
holds a message to it: a marketing message never goes to a user who
opted out or was erased (docs/consent.md, "Every door"). The shipped kinds'
categories are the project's; any other type (a custom one such as
support_followup) is marketing unless declared otherwise here.`

func newCategoriesCommand(databaseURL *string, runF func(*categoriesOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "categories",
		Short: "The message types' Meta categories (marketing, utility, ...): list, set, unset",
		Long:  categoriesLong,
		Args:  cobra.NoArgs,
		RunE:  missingSubcommand,
	}
	list := &categoriesOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}, action: "list"}
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List the message types' Meta categories",
		Long: categoriesLong + `

Lists each shipped kind (source "kind") and each type declared with
categories set (source "declared"). Exit 0; 1 when the database fails.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(list, runF),
	}
	listCmd.Flags().StringVar(&list.output, "output", "text", "text or json")

	set := &categoriesOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}, action: "set"}
	setCmd := &cobra.Command{
		Use:   "set TYPE CATEGORY",
		Short: "Declare a custom message type's category (utility, authentication, service or marketing)",
		Long: categoriesLong + `

Declares that messages of TYPE are CATEGORY from now on, for every door;
a utility type may then go to a user who opted out of re-engagement (never
to an erased one). Exit 0; 2 for a shipped kind (its category is fixed),
an unknown category or a bad type; 1 when the database fails.`,
		Args: cobra.ExactArgs(2),
		RunE: cli.RunOptions(set, runF),
	}
	registerActor(setCmd, &set.actor, "the operator recorded with the declaration")

	unset := &categoriesOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}, action: "unset"}
	unsetCmd := &cobra.Command{
		Use:   "unset TYPE",
		Short: "Forget a custom message type's declared category: it is marketing again",
		Long: categoriesLong + `

Exit 0 (also when TYPE had no declared category); 2 for a shipped kind; 1
when the database fails.`,
		Args: cobra.ExactArgs(1),
		RunE: cli.RunOptions(unset, runF),
	}
	cmd.AddCommand(listCmd, setCmd, unsetCmd)
	return cmd
}

func (o *categoriesOptions) Validate() error {
	if err := cli.RequireDatabaseURL(*o.DBURL); err != nil {
		return err
	}
	if o.action == "list" {
		return cli.ValidateOutput(o.output)
	}
	if _, ok := sm.KindOf(sm.Message(o.Args[0])); ok {
		return cli.UsageError(fmt.Errorf("%s: %w", o.Args[0], sender.ErrKindCategory))
	}
	if o.action == "set" && !sm.Category(o.Args[1]).Valid() {
		return cli.Usagef("category %q: want one of %v", o.Args[1], sm.Categories())
	}
	o.actor = strings.TrimSpace(o.actor)
	if o.actor == "" {
		o.actor = defaultActor
	}
	return nil
}

func (o *categoriesOptions) Run(ctx context.Context) error {
	switch o.action {
	case "set":
		err := sender.DeclareCategory(ctx, o.Pool, o.Args[0], sm.Category(o.Args[1]), o.actor)
		if errors.Is(err, sender.ErrBadCategory) || errors.Is(err, sender.ErrKindCategory) {
			return cli.UsageError(err)
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.Stdout, "%s is %s\n", o.Args[0], o.Args[1])
		return err
	case "unset":
		had, err := sender.ForgetCategory(ctx, o.Pool, o.Args[0])
		if err != nil {
			return err
		}
		what := "had no declared category; it is marketing"
		if had {
			what = "is marketing again"
		}
		_, err = fmt.Fprintf(o.Stdout, "%s %s\n", o.Args[0], what)
		return err
	}
	cats, err := sender.Categories(ctx, o.Pool)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return json.NewEncoder(o.Stdout).Encode(struct {
			Types   []sender.TypeCategory `json:"types"`
			Default sm.Category           `json:"default"`
		}{cats, sm.CategoryMarketing})
	}
	tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tCATEGORY\tSOURCE")
	for _, c := range cats {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Type, c.Category, c.Source)
	}
	fmt.Fprintf(tw, "(any other)\t%s\tdefault\n", sm.CategoryMarketing)
	return tw.Flush()
}
