package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/migrations"
)

// NewCommand builds engagementctl, the operator's command.
func NewCommand() *cobra.Command {
	var databaseURL string
	root := &cobra.Command{
		Use:   "engagementctl",
		Short: "Operate the engagement scheduler: schema migrations, enqueue, cleanup, status, verify, consent, erase",
		Args:  cobra.NoArgs,
		RunE:  missingSubcommand,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	cli.RegisterDatabaseURL(root.PersistentFlags(), &databaseURL)
	root.AddCommand(newMigrateCommand(&databaseURL, nil), newEnqueueCommand(&databaseURL, nil), newCleanupCommand(&databaseURL, nil))
	root.AddCommand(newStatusCommand(&databaseURL, nil), newVerifyCommand(&databaseURL, nil), newFunnelCommand(&databaseURL, nil))
	root.AddCommand(newSeedCommand(&databaseURL, nil))
	root.AddCommand(newSmokeCommand(&databaseURL, nil))
	root.AddCommand(newRequeueCommand(&databaseURL, nil), newCancelCommand(&databaseURL, nil))
	root.AddCommand(newCheckReceiverCommand(nil))
	root.AddCommand(newConsentCommand(&databaseURL, true, nil), newConsentCommand(&databaseURL, false, nil), newEraseCommand(&databaseURL, nil))
	root.AddCommand(newCategoriesCommand(&databaseURL, nil), newPauseCommand(&databaseURL, nil))
	root.AddCommand(newPricesCommand(nil))
	return root
}

// migrateFlags are the flags every engagementctl migrate command shares.
type migrateFlags struct {
	databaseURL *string
	migrateURL  string
	cfg         migrations.Config
}

// migrateOptions is one engagementctl migrate up, down, force or version.
type migrateOptions struct {
	cli.CmdIO
	*migrateFlags
	cmd      *cobra.Command // to tell whether --database-url was given on the command line
	action   string
	all, yes bool   // down's
	output   string // check's

	work func(*migrations.Migrator) error // set by Validate
}

// newMigrateCommand builds engagementctl migrate and its subcommands,
// which open the database their own way (migrations.OpenConfig, after
// checking the connection keeps a session) and so do not embed cli.DBOptions;
// runF, when not nil, replaces each subcommand's run (see cli.RunOptions).
func newMigrateCommand(databaseURL *string, runF func(*migrateOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, review or roll back the database schema (up, check, down [N], force V, version)",
		Long: `Applies the schema through a direct connection (MIGRATE_DATABASE_URL in the
Kubernetes Job). Concurrent runs are safe: one applies, the others wait for it
(up to --wait). Each statement waits at most --lock-timeout for a lock the
bot holds; a migration that fails is undone, never left dirty. See
docs/migrations.md.`,
		Args: cobra.NoArgs,
		RunE: missingSubcommand,
	}
	f := &migrateFlags{databaseURL: databaseURL}
	fs := cmd.PersistentFlags()
	fs.StringVar(&f.migrateURL, "migrate-database-url", "",
		"PostgreSQL URL of a direct or session-mode connection, used instead of DATABASE_URL when --database-url is not given")
	cliflag.BindEnv(fs, "migrate-database-url", "MIGRATE_DATABASE_URL")
	cliflag.MarkSecret(fs, "migrate-database-url")
	fs.DurationVar(&f.cfg.LockTimeout, "lock-timeout", migrations.DefaultLockTimeout,
		"how long a migration may wait in all for a table lock another transaction holds, a second at a time (0: no limit)")
	fs.DurationVar(&f.cfg.WaitTimeout, "wait", migrations.DefaultWaitTimeout,
		"how long to wait for another engagementctl migrate to finish")
	cmd.AddCommand(migrateSubcommands(f, runF)...)
	return cmd
}

// migrateSubcommands builds migrate's subcommands (up, check, down, force,
// version), which share migrate's flags, f; each runs as a migrateOptions
// naming its action.
func migrateSubcommands(f *migrateFlags, runF func(*migrateOptions) error) []*cobra.Command {
	sub := func(c *cobra.Command, action string) *migrateOptions {
		o := &migrateOptions{migrateFlags: f, cmd: c, action: action}
		c.RunE = cli.RunOptions(o, runF)
		return o
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration (a no-op when up to date)",
		Args:  cobra.NoArgs,
	}
	sub(up, "up")
	check := &cobra.Command{
		Use:   "check",
		Short: "Print what up would do to this database, change by change, without doing it",
		Long: `Reviews a database before the first deploy, changing nothing. On the bot's
database (its tables already there) it lists the bot's tables that up would
adopt as they are, with their rows and the nullable columns the scheduler
adds to them, and every difference that would make up refuse (a column
missing or of another type, a state the state machine does not know, no
unique key on idempotency_key). Then it lists the migrations up would apply
and their statements. Exit 0 when up would run, 1 when it would refuse.
See docs/migrations.md, "Adopting the bot's database".`,
		Args: cobra.NoArgs,
	}
	c := sub(check, "check")
	check.Flags().StringVar(&c.output, "output", "text", "text or json")
	down := &cobra.Command{
		Use:   "down [N]",
		Short: "Roll back the last N migrations (default 1; --all for every one)",
		Args:  cobra.MaximumNArgs(1),
	}
	d := sub(down, "down")
	down.Flags().BoolVar(&d.all, "all", false, "roll back every migration (drops all the scheduler's tables; needs --yes)")
	down.Flags().BoolVar(&d.yes, "yes", false, "confirm --all")
	version := &cobra.Command{
		Use:   "version",
		Short: "Print the applied schema version",
		Args:  cobra.NoArgs,
	}
	sub(version, "version")
	force := &cobra.Command{
		Use:   "force V",
		Short: "Record version V as applied, clean, without running anything (repairs a dirty schema)",
		Long: `Repairs a schema left dirty by a migration that was interrupted (the process
was killed or lost its connection). Check what migration V applied, then
record the version the database really is at: V if it completed, the one
before it to have "migrate up" run it again. 0 means no migration applied.
See docs/migrations.md.`,
		Args: cobra.ExactArgs(1),
	}
	sub(force, "force")
	return []*cobra.Command{up, check, down, force, version}
}

// Validate checks the command's arguments, then the shared flags, and picks
// the database URL and the work.
func (o *migrateOptions) Validate() error {
	switch o.action {
	case "up":
		o.work = (*migrations.Migrator).Up
	case "version":
		o.work = func(*migrations.Migrator) error { return nil }
	case "check":
		if err := cli.ValidateOutput(o.output); err != nil {
			return err
		}
		o.work = o.check
	case "down":
		steps := 1
		if len(o.Args) == 1 {
			n, err := strconv.Atoi(o.Args[0])
			if err != nil || n < 1 {
				return cli.Usagef("down takes a positive number of migrations, got %q", o.Args[0])
			}
			if o.all {
				return cli.Usagef("give either N or --all, not both")
			}
			steps = n
		}
		if o.all && !o.yes {
			return cli.Usagef("migrate down --all drops every table of the scheduler and its data: add --yes to confirm")
		}
		o.work = func(m *migrations.Migrator) error {
			if o.all {
				return m.DownAll()
			}
			return m.Down(steps)
		}
	case "force":
		v, err := strconv.ParseUint(o.Args[0], 10, 64)
		known := []string{"0"}
		for _, k := range migrations.Versions() {
			known = append(known, strconv.FormatUint(uint64(k), 10))
		}
		if err != nil || !slices.Contains(known, strconv.FormatUint(v, 10)) {
			return cli.Usagef("force takes 0 or the version of a migration (%s), got %q", strings.Join(known, ", "), o.Args[0])
		}
		o.work = func(m *migrations.Migrator) error { return m.Force(uint(v)) }
	}
	if o.cfg.LockTimeout < 0 {
		return cli.Usagef("--lock-timeout must not be negative (0: no limit), got %s", o.cfg.LockTimeout)
	}
	if o.cfg.WaitTimeout <= 0 {
		return cli.Usagef("--wait must be positive, got %s", o.cfg.WaitTimeout)
	}
	*o.databaseURL = migrateDatabaseURL(o.cmd, *o.databaseURL, o.migrateURL)
	return cli.RequireDatabaseURL(*o.databaseURL)
}

// Run checks the connection keeps a session (no transaction pooler), runs
// the work on the database's migrator, then prints the schema version it
// left.
func (o *migrateOptions) Run(ctx context.Context) error {
	if err := requireMigrateSession(ctx, *o.databaseURL); err != nil {
		return err
	}
	c := o.cfg
	if c.LockTimeout == 0 {
		// The flag's 0 is no limit; migrations.Config, as River, reads 0
		// as its default and -1 as no limit.
		c.LockTimeout = -1
	}
	log := zerolog.Ctx(ctx) // the run's logger, in the run's format
	c.Waiting = func() {
		log.Warn().Msg("another engagementctl migrate is running; waiting for it to finish")
	}
	m, err := migrations.OpenConfig(ctx, *o.databaseURL, c)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := o.work(m); err != nil || o.action == "check" {
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
	fmt.Fprintf(o.Stdout, "schema version %d of %d%s\n", version, migrations.Latest, state)
	return nil
}

// check prints what Up would do (engagementctl migrate check) and fails,
// after printing it, when Up would refuse.
func (o *migrateOptions) check(m *migrations.Migrator) error {
	in, err := m.Inspect()
	if err != nil {
		return err
	}
	if o.output == "json" {
		if err := json.NewEncoder(o.Stdout).Encode(in); err != nil {
			return err
		}
	} else {
		writeInspection(o.Stdout, in)
	}
	if len(in.Differences) > 0 {
		return fmt.Errorf("%w: migrate up would refuse this database (%d difference(s) above)",
			migrations.ErrIncompatibleSchema, len(in.Differences))
	}
	return nil
}

func writeInspection(w io.Writer, in migrations.Inspection) {
	fmt.Fprintf(w, "schema version %d of %d: %d migration(s) to apply\n", in.Version, migrations.Latest, len(in.Pending))
	adopted := map[string]bool{}
	if len(in.Adopted) > 0 {
		fmt.Fprintln(w, "\nThe bot's tables, adopted as they are (rows, columns, defaults, constraints, indexes, policies kept):")
		for _, t := range in.Adopted {
			adopted[t.Name] = true
			adds := "nothing added"
			if len(t.Adds) > 0 {
				adds = "adds nullable " + strings.Join(t.Adds, ", ")
			}
			fmt.Fprintf(w, "  %s (%d rows): %s\n", t.Name, t.Rows, adds)
		}
	}
	if len(in.Differences) > 0 {
		fmt.Fprintln(w, "\nWhat keeps migrate up from running (it would refuse, changing nothing):")
		for _, d := range in.Differences {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
	if len(in.Pending) > 0 {
		fmt.Fprintln(w, "\nMigrations to apply, in order:")
	}
	for _, p := range in.Pending {
		fmt.Fprintf(w, "  %d %s: %s\n", p.Version, p.Name, p.Summary)
		for _, st := range p.Statements {
			note := ""
			if t, ok := strings.CutPrefix(st, "CREATE TABLE IF NOT EXISTS "); ok && adopted[strings.Fields(t)[0]] {
				note = "   -- exists: the bot's, kept as it is"
			}
			fmt.Fprintf(w, "      %s%s\n", st, note)
		}
	}
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
	return cli.Usagef("%s needs a command: one of %s", cmd.CommandPath(), strings.Join(names, ", "))
}
