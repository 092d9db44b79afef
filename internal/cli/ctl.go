package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/migrations"
)

// NewCtlCommand builds engagementctl, the operator's command.
func NewCtlCommand() *cobra.Command {
	var databaseURL string
	root := &cobra.Command{
		Use:   "engagementctl",
		Short: "Operate the engagement scheduler: schema migrations and more",
		Args:  cobra.NoArgs,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd)
		},
		RunE: missingSubcommand,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	registerDatabaseURL(root.PersistentFlags(), &databaseURL)
	root.AddCommand(newMigrateCommand(&databaseURL))
	return root
}

func newMigrateCommand(databaseURL *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply or roll back the database schema (up, down [N], version)",
		Args:  cobra.NoArgs,
		RunE:  missingSubcommand,
	}
	open := func(cmd *cobra.Command) (*migrations.Migrator, error) {
		if err := requireDatabaseURL(*databaseURL); err != nil {
			return nil, err
		}
		m, err := migrations.Open(cmd.Context(), *databaseURL)
		if err != nil {
			return nil, postgres.Redact(err, *databaseURL)
		}
		return m, nil
	}
	report := func(cmd *cobra.Command, m *migrations.Migrator) error {
		version, dirty, err := m.Version()
		if err != nil {
			return err
		}
		state := ""
		if dirty {
			state = " (dirty: the last migration failed half-way)"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "schema version %d of %d%s\n", version, migrations.Latest, state)
		return nil
	}

	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration (a no-op when up to date)",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			m, err := open(cmd)
			if err != nil {
				return err
			}
			defer m.Close()
			if err := m.Up(); err != nil {
				return postgres.Redact(err, *databaseURL)
			}
			return report(cmd, m)
		}),
	}

	var all bool
	down := &cobra.Command{
		Use:   "down [N]",
		Short: "Roll back the last N migrations (default 1; --all for every one)",
		Args:  cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			steps := 1
			if len(args) == 1 {
				n, err := strconv.Atoi(args[0])
				if err != nil || n < 1 {
					return usagef("down takes a positive number of migrations, got %q", args[0])
				}
				if all {
					return usagef("give either N or --all, not both")
				}
				steps = n
			}
			m, err := open(cmd)
			if err != nil {
				return err
			}
			defer m.Close()
			if all {
				err = m.DownAll()
			} else {
				err = m.Down(steps)
			}
			if err != nil {
				return postgres.Redact(err, *databaseURL)
			}
			return report(cmd, m)
		}),
	}
	down.Flags().BoolVar(&all, "all", false, "roll back every migration (drops all the scheduler's tables)")

	version := &cobra.Command{
		Use:   "version",
		Short: "Print the applied schema version",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			m, err := open(cmd)
			if err != nil {
				return err
			}
			defer m.Close()
			return report(cmd, m)
		}),
	}

	cmd.AddCommand(up, down, version)
	return cmd
}

// missingSubcommand is the RunE of commands that only group others, so that
// a missing or unknown subcommand is a usage error (exit 2), not help text
// and success.
func missingSubcommand(cmd *cobra.Command, _ []string) error {
	names := []string{}
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return usagef("%s needs a command: one of %s", cmd.CommandPath(), strings.Join(names, ", "))
}
