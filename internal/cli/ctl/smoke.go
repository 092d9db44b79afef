package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/migrations"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/sender/transport"
	"github.com/engagement-scheduler/engagement/verify"
)

// DefaultSmokeAsOf is the instant engagementctl smoke seeds relative to and
// runs the jobs as of, unless --as-of says otherwise: a Monday morning.
const DefaultSmokeAsOf = "2026-03-02T06:00:00Z"

// Bounds and default of engagementctl smoke --users.
const (
	DefaultSmokeUsers = 200
	MinSmokeUsers     = 100 // enough for every category of the mix to be all but certain
	MaxSmokeUsers     = 20000
)

// SmokeResult is what engagementctl smoke prints with --output json: one
// object, whether the run passed or not.
type SmokeResult struct {
	Job string `json:"job"` // "smoke"
	// OK is true when every expectation held.
	OK bool `json:"ok"`
	// Failure names the first broken expectation (empty when OK); the
	// command's one-line error says the same.
	Failure       string    `json:"failure,omitempty"`
	AsOf          time.Time `json:"as_of"`
	Users         int       `json:"users"`
	Seed          int64     `json:"seed"`
	SchemaVersion uint      `json:"schema_version"`
	// Expectations counts the expectations that held (all of them when OK;
	// those before the first broken one otherwise).
	Expectations int `json:"expectations"`
	// Runs holds each run's summary, by step: daily, weekly, queue_process,
	// then daily_again, weekly_again and queue_process_again.
	Runs       smokeRuns        `json:"runs"`
	Verify     *smokeVerify     `json:"verify,omitempty"`
	Queue      map[string]int64 `json:"queue"`          // messages by status at the end
	ByState    map[string]int   `json:"users_by_state"` // users by state after the seed
	DurationMS int64            `json:"duration_ms"`
}

type smokeRuns struct {
	Daily             *scheduler.Summary       `json:"daily,omitempty"`
	Weekly            *scheduler.Summary       `json:"weekly,omitempty"`
	QueueProcess      *delivery.ProcessSummary `json:"queue_process,omitempty"`
	DailyAgain        *scheduler.Summary       `json:"daily_again,omitempty"`
	WeeklyAgain       *scheduler.Summary       `json:"weekly_again,omitempty"`
	QueueProcessAgain *delivery.ProcessSummary `json:"queue_process_again,omitempty"`
}

type smokeVerify struct {
	OK     bool     `json:"ok"`
	Broken []string `json:"broken"`
}

// errExpectation marks the first broken expectation of a smoke run.
var errExpectation = errors.New("smoke")

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
	o.timeFlags.registerAsOf(cmd, DefaultSmokeAsOf, "the instant the sample is relative to and the jobs run as of, RFC3339")
	fs := cmd.Flags()
	// The jobs' step logs are noise in a CI log; --log-level info shows them.
	o.logs.RegisterLevel(fs, "warn")
	fs.IntVar(&o.users, "users", DefaultSmokeUsers, "sample users to seed")
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
	if o.users < MinSmokeUsers || o.users > MaxSmokeUsers {
		return cli.Usagef("--users must be from %d to %d, got %d", MinSmokeUsers, MaxSmokeUsers, o.users)
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
	res := &SmokeResult{Job: "smoke", AsOf: o.asOf.Time(), Users: o.users, Seed: o.seed, Queue: map[string]int64{}}
	start := time.Now()
	runErr := runSmoke(ctx, *o.databaseURL, o.log, res)
	res.DurationMS = time.Since(start).Milliseconds()
	var exit *cli.ExitError
	if errors.As(runErr, &exit) && exit.Code == cli.ExitUsage {
		return runErr
	}
	res.OK = runErr == nil
	switch {
	case errors.Is(runErr, errExpectation):
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

// smokeCheck accumulates expectations; the first broken one ends the run.
type smokeCheck struct {
	res *SmokeResult
}

// expect records one expectation: it holds when ok, else the run ends with
// an error naming it, what was seen and what was wanted.
func (c smokeCheck) expect(name string, ok bool, format string, args ...any) error {
	if !ok {
		return fmt.Errorf("%w: %s: %s", errExpectation, name, fmt.Sprintf(format, args...))
	}
	c.res.Expectations++
	return nil
}

// runSmoke does the smoke run, filling res as it goes.
func runSmoke(ctx context.Context, databaseURL string, log zerolog.Logger, res *SmokeResult) error {
	if err := refuseUsers(ctx, databaseURL); err != nil {
		return err
	}
	m, err := migrations.Open(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("open migrations: %w", err)
	}
	err = m.Up()
	if err == nil {
		res.SchemaVersion, _, err = m.Version()
	}
	m.Close()
	if err != nil {
		return err
	}
	pool, err := cli.OpenChecked(ctx, databaseURL, "engagementctl-smoke")
	if err != nil {
		return err
	}
	defer pool.Close()
	c := smokeCheck{res: res}
	asOf := res.AsOf

	st, err := seed.Generate(ctx, pool, seed.Options{Users: res.Users, Seed: res.Seed, AsOf: asOf})
	if err != nil {
		return fmt.Errorf("seed the sample: %w", err)
	}
	res.ByState = st.ByState
	if err := c.expect("seed", st.Users == res.Users, "the database holds %d users after seeding %d", st.Users, res.Users); err != nil {
		return err
	}

	// First runs: the jobs do their work.
	jobCfg := scheduler.Config{AsOf: asOf, Logger: log}
	daily, err := scheduler.RunDaily(ctx, pool, jobCfg)
	if err != nil {
		return fmt.Errorf("engagement-daily: %w", err)
	}
	res.Runs.Daily = daily
	if err := c.expect("daily", daily.Failed == 0 && daily.Duplicates == 0,
		"%d users failed, %d duplicate inserts; want 0 and 0", daily.Failed, daily.Duplicates); err != nil {
		return err
	}
	if err := c.expect("daily", daily.Queued > 0 && daily.Queued <= daily.Processed,
		"processed %d users and queued %d goodbyes; the sample's inactive users should get goodbyes", daily.Processed, daily.Queued); err != nil {
		return err
	}
	weekly, err := scheduler.RunWeekly(ctx, pool, jobCfg)
	if err != nil {
		return fmt.Errorf("engagement-weekly: %w", err)
	}
	res.Runs.Weekly = weekly
	if err := c.expect("weekly", weekly.Failed == 0 && weekly.Duplicates == 0 && weekly.Queued > 0,
		"queued %d reviews, %d failed, %d duplicates; want some reviews, no failures, no duplicates", weekly.Queued, weekly.Failed, weekly.Duplicates); err != nil {
		return err
	}
	var logLines atomic.Int64
	queue, err := smokeQueueProcess(ctx, pool, log, &logLines)
	if err != nil {
		return fmt.Errorf("queue-process: %w", err)
	}
	res.Runs.QueueProcess = &queue
	queued := daily.Queued + weekly.Queued
	if err := c.expect("queue_process", queue.Sent == queued && queue.Failed == 0 && queue.Retried == 0,
		"sent %d, retried %d, failed %d; want the %d queued messages sent at the first attempt", queue.Sent, queue.Retried, queue.Failed, queued); err != nil {
		return err
	}
	if err := c.expect("queue_process", logLines.Load() == int64(queue.Sent),
		"the log transport wrote %d lines for %d sends", logLines.Load(), queue.Sent); err != nil {
		return err
	}
	before, err := smokeCounts(ctx, pool)
	if err != nil {
		return err
	}

	// Second runs, as of the same instants: nothing new may appear.
	dailyAgain, err := scheduler.RunDaily(ctx, pool, jobCfg)
	if err != nil {
		return fmt.Errorf("engagement-daily again: %w", err)
	}
	res.Runs.DailyAgain = dailyAgain
	if err := c.expect("daily_again", dailyAgain.Processed == 0 && dailyAgain.Queued == 0 && dailyAgain.Failed == 0,
		"a re-run of the same day processed %d users and queued %d messages; want nothing", dailyAgain.Processed, dailyAgain.Queued); err != nil {
		return err
	}
	weeklyAgain, err := scheduler.RunWeekly(ctx, pool, jobCfg)
	if err != nil {
		return fmt.Errorf("engagement-weekly again: %w", err)
	}
	res.Runs.WeeklyAgain = weeklyAgain
	if err := c.expect("weekly_again", weeklyAgain.Queued == 0 && weeklyAgain.Failed == 0 && weeklyAgain.Duplicates == weekly.Queued,
		"a re-run of the same week queued %d reviews with %d duplicates; want 0 queued and the week's %d reviews as duplicates",
		weeklyAgain.Queued, weeklyAgain.Duplicates, weekly.Queued); err != nil {
		return err
	}
	queueAgain, err := smokeQueueProcess(ctx, pool, log, &logLines)
	if err != nil {
		return fmt.Errorf("queue-process again: %w", err)
	}
	res.Runs.QueueProcessAgain = &queueAgain
	if err := c.expect("queue_process_again", queueAgain.Processed == 0 && queueAgain.Sent == 0,
		"a re-run found %d messages to deliver and sent %d; want none", queueAgain.Processed, queueAgain.Sent); err != nil {
		return err
	}
	after, err := smokeCounts(ctx, pool)
	if err != nil {
		return err
	}
	if err := c.expect("nothing_new", after.equal(before),
		"the re-runs changed the database: %s before, %s after", before, after); err != nil {
		return err
	}
	res.Queue = after.byStatus
	if err := c.expect("queue_settled", after.byStatus["sent"] == int64(queued) && after.messages == int64(queued),
		"the queue holds %d messages, %d sent; want all %d sent", after.messages, after.byStatus["sent"], queued); err != nil {
		return err
	}

	rep, err := verify.Run(ctx, pool, verify.Config{AsOf: asOf})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	res.Verify = &smokeVerify{OK: rep.OK, Broken: rep.Broken}
	return c.expect("verify", rep.OK, "invariants broken: %v", rep.Broken)
}

// refuseUsers returns a usage error when the database already holds users:
// smoke writes only to databases made for it. A database without the
// schema holds none.
func refuseUsers(ctx context.Context, databaseURL string) error {
	conn, err := postgres.Open(ctx, databaseURL, "engagementctl-smoke")
	if err != nil {
		return err
	}
	defer conn.Close()
	var users int64
	err = conn.QueryRow(ctx, `SELECT count(*) FROM user_profiles`).Scan(&users)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table: no schema yet
		return nil
	case err != nil:
		return fmt.Errorf("count existing users: %w", err)
	case users > 0:
		return cli.Usagef("the database already holds %d users; smoke runs only on an empty database (a CI service container), and wrote nothing", users)
	}
	return nil
}

// smokeQueueProcess runs queue-process in process: the log transport
// (counting its lines, writing them nowhere), no pacing.
func smokeQueueProcess(ctx context.Context, pool *pgxpool.Pool, log zerolog.Logger, lines *atomic.Int64) (delivery.ProcessSummary, error) {
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
		Transport:    transport.NewLog(lineCounter{lines}),
		SendInterval: -1,
		Logger:       log,
	})
	if err != nil {
		return delivery.ProcessSummary{}, err
	}
	return p.Run(ctx)
}

// lineCounter is a writer that counts lines and keeps nothing.
type lineCounter struct{ n *atomic.Int64 }

func (w lineCounter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b == '\n' {
			w.n.Add(1)
		}
	}
	return len(p), nil
}

// smokeTally is what the re-runs must not change.
type smokeTally struct {
	transitions, messages int64
	byState               string
	byStatus              map[string]int64
}

func (s smokeTally) String() string {
	return fmt.Sprintf("%d transitions, %d messages %v, users %s", s.transitions, s.messages, s.byStatus, s.byState)
}

func (s smokeTally) equal(o smokeTally) bool {
	if s.transitions != o.transitions || s.messages != o.messages || s.byState != o.byState || len(s.byStatus) != len(o.byStatus) {
		return false
	}
	for k, v := range s.byStatus {
		if o.byStatus[k] != v {
			return false
		}
	}
	return true
}

func smokeCounts(ctx context.Context, pool *pgxpool.Pool) (smokeTally, error) {
	t := smokeTally{byStatus: map[string]int64{}}
	err := pool.QueryRow(ctx, sqlfile.Must(queryFiles, "smoke_counts")).
		Scan(&t.transitions, &t.messages, &t.byState)
	if err != nil {
		return t, fmt.Errorf("count the outcome: %w", err)
	}
	rows, err := pool.Query(ctx, `SELECT status, count(*) FROM engagement_message_queue GROUP BY status`)
	if err != nil {
		return t, fmt.Errorf("count the queue: %w", err)
	}
	var status string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error { t.byStatus[status] = n; return nil })
	if err != nil {
		return t, fmt.Errorf("count the queue: %w", err)
	}
	return t, nil
}

// writeSmoke prints the result: one JSON object, or a few lines of text.
func writeSmoke(w io.Writer, format string, res *SmokeResult) error {
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
