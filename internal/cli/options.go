package cli

import (
	"context"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/migrations"
)

// options is what each command builds from its flags: Validate checks
// every value before any work (a usage error, exit 2, in one line naming
// the flag) and resolves what the run needs; Run does the work, reading
// nothing but the options.
type options interface {
	bind(stdout, stderr io.Writer, args []string)
	Validate() error
	Run(ctx context.Context) error
}

// cmdIO is what every options value embeds: the streams the command writes
// to and its positional arguments, set when it runs.
type cmdIO struct {
	stdout, stderr io.Writer
	args           []string
}

func (c *cmdIO) bind(stdout, stderr io.Writer, args []string) {
	c.stdout, c.stderr, c.args = stdout, stderr, args
}

// dbOptions is what the options of a command whose Run needs the database
// embed: runOptions opens the pool on the database URL and checks the
// schema is migrated after Validate, before Run, and closes it once Run
// returns. Run reads the pool, never the URL. A command that must not
// connect (check-receiver), or that opens the database its own way
// (migrate, smoke), does not embed it.
type dbOptions struct {
	dbURL *string       // the --database-url flag's value, the environment applied
	pool  *pgxpool.Pool // set by runOptions for Run
}

// database is dbOptions itself, for runOptions to find in the options that
// embed it.
func (d *dbOptions) database() *dbOptions { return d }

// needsDB is options that embed dbOptions.
type needsDB interface {
	database() *dbOptions
}

// wrapper is options that need something around their run besides the
// database: runOptions calls around with the run (the database's open, Run
// and the pool's close), so that around can put the command's logger in
// the run's context (the pool logs the server's warnings with the logger
// its context carries when it opens) and report how the run ended, a
// database that failed to open included (the metrics pushed).
type wrapper interface {
	around(ctx context.Context, run func(context.Context) error) error
}

// runOptions is the RunE of a command whose work is o: bound to the
// command's streams and arguments, validated, and run: the database opened
// and checked first when o needs it (dbOptions), its connections named
// after the binary. Its errors exit 1 unless they carry a code (runE).
//
// runF, when not nil, replaces the run: a test passes one to get the
// options the command line and the environment made, once validated,
// without any work, database or process (as gh's NewCmdClose(f, runF)).
func runOptions[O options](o O, runF func(O) error) func(*cobra.Command, []string) error {
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
func run(ctx context.Context, app string, o options) error {
	work := o.Run
	if n, ok := o.(needsDB); ok {
		db := n.database()
		work = func(ctx context.Context) error {
			pool, err := openChecked(ctx, *db.dbURL, app)
			if err != nil {
				return err
			}
			defer pool.Close()
			db.pool = pool
			return o.Run(ctx)
		}
	}
	if w, ok := o.(wrapper); ok {
		return w.around(ctx, work)
	}
	return work(ctx)
}

// openChecked opens the pool, its connections named after app, and checks
// the schema is migrated. Its errors exit 1 (runE) and never contain the
// password.
func openChecked(ctx context.Context, databaseURL, app string) (*pgxpool.Pool, error) {
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
