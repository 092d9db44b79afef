package cli

import (
	"context"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/migrations"
)

// Options is what each command builds from its flags: Validate checks
// every value before any work (a usage error, exit 2, in one line naming
// the flag) and resolves what the run needs; Run does the work, reading
// nothing but the options. Every Options embeds CmdIO, which binds it.
type Options interface {
	bind(stdout, stderr io.Writer, args []string)
	Validate() error
	Run(ctx context.Context) error
}

// CmdIO is what every options value embeds: the streams the command writes
// to and its positional arguments, set when it runs.
type CmdIO struct {
	Stdout, Stderr io.Writer
	Args           []string
}

func (c *CmdIO) bind(stdout, stderr io.Writer, args []string) {
	c.Stdout, c.Stderr, c.Args = stdout, stderr, args
}

// DBOptions is what the options of a command whose Run needs the database
// embed: RunOptions opens the pool on the database URL and checks the
// schema is migrated after Validate, before Run, and closes it once Run
// returns. Run reads the pool, never the URL. A command that must not
// connect (check-receiver), or that opens the database its own way
// (migrate, smoke), does not embed it.
type DBOptions struct {
	DBURL *string       // the --database-url flag's value, the environment applied
	Pool  *pgxpool.Pool // set by RunOptions for Run
}

// database is DBOptions itself, for RunOptions to find in the options that
// embed it.
func (d *DBOptions) database() *DBOptions { return d }

// needsDB is options that embed DBOptions.
type needsDB interface {
	database() *DBOptions
}

// Wrapper is options that need something around their run besides the
// database: RunOptions calls Around with the run (the database's open, Run
// and the pool's close), so that Around can put the command's logger in
// the run's context (the pool logs the server's warnings with the logger
// its context carries when it opens) and report how the run ended, a
// database that failed to open included (the metrics pushed). Exported,
// as the method is, so that the commands in other packages implement it
// (a method named around there would be another method, never called):
// each says so with a var _ Wrapper line.
type Wrapper interface {
	Around(ctx context.Context, run func(context.Context) error) error
}

// RunOptions is the RunE of a command whose work is o: bound to the
// command's streams and arguments, validated, and run: the database opened
// and checked first when o needs it (DBOptions), its connections named
// after the binary. Its errors exit 1 unless they carry a code (runE).
//
// runF, when not nil, replaces the run: a test passes one to get the
// options the command line and the environment made, once validated,
// without any work, database or process (as gh's NewCmdClose(f, runF)).
func RunOptions[O Options](o O, runF func(O) error) func(*cobra.Command, []string) error {
	return runE(func(cmd *cobra.Command, args []string) error {
		o.bind(cmd.OutOrStdout(), cmd.ErrOrStderr(), args)
		if err := o.Validate(); err != nil {
			return err
		}
		if runF != nil {
			return runF(o)
		}
		return run(cmd.Context(), cmd.Root().Name(), o)
	})
}

// run runs validated options: around their wrapper, if any, with the
// database opened for them if they need it.
func run(ctx context.Context, app string, o Options) error {
	work := o.Run
	if n, ok := o.(needsDB); ok {
		db := n.database()
		work = func(ctx context.Context) error {
			pool, err := OpenChecked(ctx, *db.DBURL, app)
			if err != nil {
				return err
			}
			defer pool.Close()
			db.Pool = pool
			return o.Run(ctx)
		}
	}
	if w, ok := o.(Wrapper); ok {
		return w.Around(ctx, work)
	}
	return work(ctx)
}

// OpenChecked opens the pool, its connections named after app, and checks
// the schema is migrated. Its errors exit 1 (runE) and never contain the
// password.
func OpenChecked(ctx context.Context, databaseURL, app string) (*pgxpool.Pool, error) {
	pool, err := postgres.Open(ctx, databaseURL, app)
	if err != nil {
		return nil, err
	}
	if err := migrations.Check(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}
