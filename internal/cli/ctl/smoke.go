package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/smoke"
)

// smokeOptions is one engagementctl smoke.
type smokeOptions struct {
	cli.CmdIO
	timeFlags
	databaseURL *string
	users       int
	seed        int64
	logs        cli.LogFlags

	log zerolog.Logger // set by Validate
}

// newSmokeCommand builds engagementctl smoke, which opens the database its
// own way (it refuses a database with users, then migrates it) and so
// does not embed cli.DBOptions; runF, when not nil, replaces the run (see
// cli.RunOptions).
func newSmokeCommand(databaseURL *string, runF func(*smokeOptions) error) *cobra.Command {
	o := &smokeOptions{databaseURL: databaseURL}
	cmd := &cobra.Command{
		Use:   "smoke",
		Short: "Exercise every job on an empty database and check the outcome (for CI)",
		Long: `For CI smoke runs against a throwaway PostgreSQL (a service container).
On an empty database it applies the migrations, seeds --users sample users
(the benchmarks' mix, relative to --as-of), runs engagement-daily,
engagement-weekly (both as of --as-of) and queue-process (log transport,
no pacing) in this process, runs each of them again (nothing new may
appear: no user moved, no message queued or sent), runs verify, and prints
a summary (--output json: one JSON object).

Exit codes: 0 every expectation held; 1 one did not (the error line names
the first broken expectation) or the database failed; 2 usage, or the
database already holds users: smoke refuses it and writes nothing. Never
point it at a database that matters.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	o.timeFlags.registerAsOf(cmd, smoke.DefaultAsOf, "the instant the sample is relative to and the jobs run as of, RFC3339")
	fs := cmd.Flags()
	// The jobs' step logs are noise in a CI log; --log-level info shows them.
	o.logs.RegisterLevel(fs, "warn")
	fs.IntVar(&o.users, "users", smoke.DefaultUsers, "sample users to seed")
	fs.Int64Var(&o.seed, "seed", 1, "the sample's seed: the same seed gives the same users")
	return cmd
}

func (o *smokeOptions) Validate() error {
	if err := cli.RequireDatabaseURL(*o.databaseURL); err != nil {
		return err
	}
	if err := cli.ValidateOutput(o.output); err != nil {
		return err
	}
	if o.users < smoke.MinUsers || o.users > smoke.MaxUsers {
		return cli.Usagef("--users must be from %d to %d, got %d", smoke.MinUsers, smoke.MaxUsers, o.users)
	}
	if err := o.asOf.Check(); err != nil {
		return err
	}
	var err error
	o.log, err = o.logs.Logger(o.Stderr, "engagementctl-smoke")
	return err
}

// Run exercises the jobs and writes the result, unless the database was
// refused (nothing written, nothing to report).
func (o *smokeOptions) Run(ctx context.Context) error {
	res := &smoke.Result{Job: "smoke", AsOf: o.asOf.Time(), Users: o.users, Seed: o.seed, Queue: map[string]int64{}}
	start := time.Now()
	version, err := smoke.Prepare(ctx, *o.databaseURL)
	switch {
	case errors.Is(err, smoke.ErrNotEmpty):
		return cli.UsageError(err)
	case err != nil:
		return err
	}
	res.SchemaVersion = version
	pool, err := cli.OpenChecked(ctx, *o.databaseURL, "engagementctl-smoke")
	if err != nil {
		return err
	}
	defer pool.Close()
	runErr := smoke.Run(ctx, pool, o.log, res)
	res.DurationMS = time.Since(start).Milliseconds()
	res.OK = runErr == nil
	switch {
	case errors.Is(runErr, smoke.ErrExpectation):
		res.Failure = runErr.Error()
	case runErr != nil:
		// It could not run (the database did not answer, a job failed):
		// as every command, an error and nothing on stdout.
		return runErr
	}
	if err := writeSmoke(o.Stdout, o.output, res); err != nil {
		return err
	}
	return runErr
}

// writeSmoke prints the result: one JSON object, or a few lines of text.
func writeSmoke(w io.Writer, format string, res *smoke.Result) error {
	var err error
	if format == "json" {
		err = json.NewEncoder(w).Encode(res)
	} else {
		verdict := fmt.Sprintf("ok: %d expectations held", res.Expectations)
		if !res.OK {
			verdict = fmt.Sprintf("FAILED after %d expectations held", res.Expectations)
			if res.Failure != "" {
				verdict += ": " + res.Failure
			}
		}
		_, err = fmt.Fprintf(w, "smoke as of %s, %d users (seed %d), schema %d: %s in %s\n",
			res.AsOf.Format(time.RFC3339), res.Users, res.Seed, res.SchemaVersion, verdict,
			(time.Duration(res.DurationMS) * time.Millisecond).String())
		r := res.Runs
		if err == nil && r.Daily != nil && r.Weekly != nil && r.QueueProcess != nil {
			_, err = fmt.Fprintf(w, "daily moved %d users and queued %d goodbyes; weekly queued %d reviews; queue-process sent %d\n",
				r.Daily.Succeeded, r.Daily.Queued, r.Weekly.Queued, r.QueueProcess.Sent)
		}
	}
	if err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
