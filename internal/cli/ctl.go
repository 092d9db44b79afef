package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/migrations"
)

// NewCtlCommand builds engagementctl, the operator's command.
func NewCtlCommand() *cobra.Command {
	var databaseURL string
	root := &cobra.Command{
		Use:   "engagementctl",
		Short: "Operate the engagement scheduler: schema migrations, enqueue, cleanup, status, verify",
		Args:  cobra.NoArgs,
		RunE:  missingSubcommand,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	registerDatabaseURL(root.PersistentFlags(), &databaseURL)
	root.AddCommand(newMigrateCommand(&databaseURL), newEnqueueCommand(&databaseURL), newCleanupCommand(&databaseURL))
	root.AddCommand(newStatusCommand(&databaseURL), newVerifyCommand(&databaseURL))
	root.AddCommand(newSeedCommand(&databaseURL))
	root.AddCommand(newSmokeCommand(&databaseURL))
	root.AddCommand(newRequeueCommand(&databaseURL), newCancelCommand(&databaseURL))
	root.AddCommand(newCheckReceiverCommand())
	return root
}

func newMigrateCommand(databaseURL *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply or roll back the database schema (up, down [N], force V, version)",
		Long: `Applies the schema through a direct connection (MIGRATE_DATABASE_URL in the
Kubernetes Job). Concurrent runs are safe: one applies, the others wait for it
(up to --wait). Each statement waits at most --lock-timeout for a lock the
bot holds; a migration that fails is undone, never left dirty. See
docs/migrations.md.`,
		Args: cobra.NoArgs,
		RunE: missingSubcommand,
	}
	var (
		cfg        migrations.Config
		migrateURL string
	)
	cmd.PersistentFlags().StringVar(&migrateURL, "migrate-database-url", "",
		"PostgreSQL URL of a direct or session-mode connection, used instead of DATABASE_URL when --database-url is not given")
	bindEnv(cmd.PersistentFlags(), "migrate-database-url", "MIGRATE_DATABASE_URL")
	markSecret(cmd.PersistentFlags(), "migrate-database-url")
	cmd.PersistentFlags().DurationVar(&cfg.LockTimeout, "lock-timeout", migrations.DefaultLockTimeout,
		"how long one migration statement may wait for a table lock another transaction holds (0: no limit)")
	cmd.PersistentFlags().DurationVar(&cfg.WaitTimeout, "wait", migrations.DefaultWaitTimeout,
		"how long to wait for another engagementctl migrate to finish")
	// migrating runs fn on the database's migrator, then prints the schema
	// version it left.
	migrating := func(fn func(*migrations.Migrator) error) func(*cobra.Command, []string) error {
		return runE(func(cmd *cobra.Command, _ []string) error {
			if cfg.LockTimeout < 0 {
				return usagef("--lock-timeout must not be negative (0: no limit), got %s", cfg.LockTimeout)
			}
			if cfg.WaitTimeout <= 0 {
				return usagef("--wait must be positive, got %s", cfg.WaitTimeout)
			}
			*databaseURL = migrateDatabaseURL(cmd, *databaseURL, migrateURL)
			if err := requireDatabaseURL(*databaseURL); err != nil {
				return err
			}
			if err := requireMigrateSession(cmd.Context(), *databaseURL); err != nil {
				return err
			}
			c := cfg
			if c.LockTimeout == 0 {
				// The flag's 0 is no limit; migrations.Config reads 0 as its
				// default and a negative value as no limit.
				c.LockTimeout = -1
			}
			c.Waiting = func() {
				fmt.Fprintln(cmd.ErrOrStderr(), "engagementctl: another engagementctl migrate is running; waiting for it to finish")
			}
			m, err := migrations.OpenConfig(cmd.Context(), *databaseURL, c)
			if err != nil {
				return err
			}
			defer m.Close()
			if err := fn(m); err != nil {
				return err
			}
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
		})
	}

	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration (a no-op when up to date)",
		Args:  cobra.NoArgs,
		RunE:  migrating((*migrations.Migrator).Up),
	}

	var all, yes bool
	down := &cobra.Command{
		Use:   "down [N]",
		Short: "Roll back the last N migrations (default 1; --all for every one)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			if all && !yes {
				return usagef("migrate down --all drops every table of the scheduler and its data: add --yes to confirm")
			}
			return migrating(func(m *migrations.Migrator) error {
				if all {
					return m.DownAll()
				}
				return m.Down(steps)
			})(cmd, args)
		},
	}
	down.Flags().BoolVar(&all, "all", false, "roll back every migration (drops all the scheduler's tables; needs --yes)")
	down.Flags().BoolVar(&yes, "yes", false, "confirm --all")

	version := &cobra.Command{
		Use:   "version",
		Short: "Print the applied schema version",
		Args:  cobra.NoArgs,
		RunE:  migrating(func(*migrations.Migrator) error { return nil }),
	}

	force := &cobra.Command{
		Use:   "force V",
		Short: "Record version V as applied, clean, without running anything (repairs a dirty schema)",
		Long: `Repairs a schema left dirty by a migration that was interrupted (the process
was killed or lost its connection). Check what migration V applied, then
record the version the database really is at: V if it completed, the one
before it to have "migrate up" run it again. 0 means no migration applied.
See docs/migrations.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := strconv.ParseUint(args[0], 10, 64)
			known := []string{"0"}
			for _, k := range migrations.Versions() {
				known = append(known, strconv.FormatUint(uint64(k), 10))
			}
			if err != nil || !slices.Contains(known, strconv.FormatUint(v, 10)) {
				return usagef("force takes 0 or the version of a migration (%s), got %q", strings.Join(known, ", "), args[0])
			}
			return migrating(func(m *migrations.Migrator) error { return m.Force(uint(v)) })(cmd, args)
		},
	}

	cmd.AddCommand(up, down, force, version)
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
