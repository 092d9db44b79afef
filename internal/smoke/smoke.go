// Package smoke is engagementctl smoke's run: on an empty database, the
// migrations, a seeded sample, every job (daily, weekly, queue-process with
// the log transport) run in this process twice, and verify, each outcome
// checked against what it must be. The command (internal/cli/ctl) keeps
// the flags, the output and the exit codes.
package smoke

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/migrations"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/sender/transport"
	"github.com/engagement-scheduler/engagement/verify"
)

// The package's statements are its queries/*.sql files, typed in
// queries.gen.go (make sql).

// DefaultAsOf is the instant a smoke run seeds relative to and runs the
// jobs as of, unless told otherwise: a Monday morning.
const DefaultAsOf = "2026-03-02T06:00:00Z"

// Bounds and default of the sample's users.
const (
	DefaultUsers = 200
	MinUsers     = 100 // enough for every category of the mix to be all but certain
	MaxUsers     = 20000
)

var (
	// ErrExpectation marks the first broken expectation of a run.
	ErrExpectation = errors.New("smoke")
	// ErrNotEmpty is Prepare's refusal of a database that holds users.
	ErrNotEmpty = errors.New("not an empty database")
)

// Result is what engagementctl smoke prints with --output json: one
// object, whether the run passed or not.
type Result struct {
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
	Runs       Runs             `json:"runs"`
	Verify     *Verify          `json:"verify,omitempty"`
	Queue      map[string]int64 `json:"queue"`          // messages by status at the end
	ByState    map[string]int   `json:"users_by_state"` // users by state after the seed
	DurationMS int64            `json:"duration_ms"`
}

// Runs holds each run's summary.
type Runs struct {
	Daily             *scheduler.Summary       `json:"daily,omitempty"`
	Weekly            *scheduler.Summary       `json:"weekly,omitempty"`
	QueueProcess      *delivery.ProcessSummary `json:"queue_process,omitempty"`
	DailyAgain        *scheduler.Summary       `json:"daily_again,omitempty"`
	WeeklyAgain       *scheduler.Summary       `json:"weekly_again,omitempty"`
	QueueProcessAgain *delivery.ProcessSummary `json:"queue_process_again,omitempty"`
}

// Verify is verify's verdict at the end.
type Verify struct {
	OK     bool     `json:"ok"`
	Broken []string `json:"broken"`
}

// check accumulates expectations; the first broken one ends the run.
type check struct {
	res *Result
}

// expect records one expectation: it holds when ok, else the run ends with
// an error naming it, what was seen and what was wanted.
func (c check) expect(name string, ok bool, format string, args ...any) error {
	if !ok {
		return fmt.Errorf("%w: %s: %s", ErrExpectation, name, fmt.Sprintf(format, args...))
	}
	c.res.Expectations++
	return nil
}

// Prepare readies databaseURL for a smoke run: it refuses a database that
// holds users (ErrNotEmpty, nothing written), then applies the migrations
// and returns the schema's version.
func Prepare(ctx context.Context, databaseURL string) (uint, error) {
	if err := refuseUsers(ctx, databaseURL); err != nil {
		return 0, err
	}
	m, err := migrations.Open(ctx, databaseURL)
	if err != nil {
		return 0, fmt.Errorf("open migrations: %w", err)
	}
	defer m.Close()
	if err := m.Up(); err != nil {
		return 0, err
	}
	version, _, err := m.Version()
	return version, err
}

// Run does the smoke run on a prepared database, filling res (its AsOf,
// Users and Seed say what to seed) as it goes. The first broken
// expectation ends it with an error wrapping ErrExpectation; any other
// error means it could not run.
func Run(ctx context.Context, pool *pgxpool.Pool, log zerolog.Logger, res *Result) error {
	c := check{res: res}
	asOf := res.AsOf

	st, err := seed.Generate(ctx, pool, seed.Options{Users: res.Users, Seed: res.Seed, AsOf: asOf})
	if err != nil {
		return fmt.Errorf("seed the sample: %w", err)
	}
	res.ByState = st.ByState
	if err := c.expect("seed", st.Users == res.Users, "the database holds %d users after seeding %d", st.Users, res.Users); err != nil {
		return err
	}

	s := &smokeRun{pool: pool, log: log, c: c, res: res, jobCfg: scheduler.Config{AsOf: asOf, Logger: log}}
	// First runs: the jobs do their work.
	queued, err := s.firstRuns(ctx)
	if err != nil {
		return err
	}
	before, err := counts(ctx, pool)
	if err != nil {
		return err
	}

	// Second runs, as of the same instants: nothing new may appear.
	if err := s.secondRuns(ctx, res.Runs.Weekly.Queued); err != nil {
		return err
	}
	after, err := counts(ctx, pool)
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
	res.Verify = &Verify{OK: rep.OK, Broken: rep.Broken}
	return c.expect("verify", rep.OK, "invariants broken: %v", rep.Broken)
}

// smokeRun is what the smoke run's job runs share: the database, the
// jobs' configuration, the log transport's line count, and the result
// they fill in.
type smokeRun struct {
	pool     *pgxpool.Pool
	log      zerolog.Logger
	c        check
	res      *Result
	jobCfg   scheduler.Config
	logLines atomic.Int64
}

// firstRuns runs engagement-daily, engagement-weekly and queue-process
// once each and checks that they did their work: goodbyes and reviews
// queued, then all of them sent at the first attempt. It returns how many
// messages they queued.
func (s *smokeRun) firstRuns(ctx context.Context) (queued int, err error) {
	daily, err := scheduler.RunDaily(ctx, s.pool, s.jobCfg)
	if err != nil {
		return 0, fmt.Errorf("engagement-daily: %w", err)
	}
	s.res.Runs.Daily = daily
	if err := s.c.expect("daily", daily.Failed == 0 && daily.Duplicates == 0,
		"%d users failed, %d duplicate inserts; want 0 and 0", daily.Failed, daily.Duplicates); err != nil {
		return 0, err
	}
	if err := s.c.expect("daily", daily.Queued > 0 && daily.Queued <= daily.Processed,
		"processed %d users and queued %d goodbyes; the sample's inactive users should get goodbyes", daily.Processed, daily.Queued); err != nil {
		return 0, err
	}
	weekly, err := scheduler.RunWeekly(ctx, s.pool, s.jobCfg)
	if err != nil {
		return 0, fmt.Errorf("engagement-weekly: %w", err)
	}
	s.res.Runs.Weekly = weekly
	if err := s.c.expect("weekly", weekly.Failed == 0 && weekly.Duplicates == 0 && weekly.Queued > 0,
		"queued %d reviews, %d failed, %d duplicates; want some reviews, no failures, no duplicates", weekly.Queued, weekly.Failed, weekly.Duplicates); err != nil {
		return 0, err
	}
	queue, err := queueProcess(ctx, s.pool, s.log, &s.logLines)
	if err != nil {
		return 0, fmt.Errorf("queue-process: %w", err)
	}
	s.res.Runs.QueueProcess = &queue
	queued = daily.Queued + weekly.Queued
	if err := s.c.expect("queue_process", queue.Sent == queued && queue.Failed == 0 && queue.Retried == 0,
		"sent %d, retried %d, failed %d; want the %d queued messages sent at the first attempt", queue.Sent, queue.Retried, queue.Failed, queued); err != nil {
		return 0, err
	}
	if err := s.c.expect("queue_process", s.logLines.Load() == int64(queue.Sent),
		"the log transport wrote %d lines for %d sends", s.logLines.Load(), queue.Sent); err != nil {
		return 0, err
	}
	return queued, nil
}

// secondRuns runs the three again, as of the same instants, and checks
// that they found nothing to do: the week's weeklyQueued reviews are
// duplicates, nothing is queued or sent.
func (s *smokeRun) secondRuns(ctx context.Context, weeklyQueued int) error {
	dailyAgain, err := scheduler.RunDaily(ctx, s.pool, s.jobCfg)
	if err != nil {
		return fmt.Errorf("engagement-daily again: %w", err)
	}
	s.res.Runs.DailyAgain = dailyAgain
	if err := s.c.expect("daily_again", dailyAgain.Processed == 0 && dailyAgain.Queued == 0 && dailyAgain.Failed == 0,
		"a re-run of the same day processed %d users and queued %d messages; want nothing", dailyAgain.Processed, dailyAgain.Queued); err != nil {
		return err
	}
	weeklyAgain, err := scheduler.RunWeekly(ctx, s.pool, s.jobCfg)
	if err != nil {
		return fmt.Errorf("engagement-weekly again: %w", err)
	}
	s.res.Runs.WeeklyAgain = weeklyAgain
	if err := s.c.expect("weekly_again", weeklyAgain.Queued == 0 && weeklyAgain.Failed == 0 && weeklyAgain.Duplicates == weeklyQueued,
		"a re-run of the same week queued %d reviews with %d duplicates; want 0 queued and the week's %d reviews as duplicates",
		weeklyAgain.Queued, weeklyAgain.Duplicates, weeklyQueued); err != nil {
		return err
	}
	queueAgain, err := queueProcess(ctx, s.pool, s.log, &s.logLines)
	if err != nil {
		return fmt.Errorf("queue-process again: %w", err)
	}
	s.res.Runs.QueueProcessAgain = &queueAgain
	if err := s.c.expect("queue_process_again", queueAgain.Processed == 0 && queueAgain.Sent == 0,
		"a re-run found %d messages to deliver and sent %d; want none", queueAgain.Processed, queueAgain.Sent); err != nil {
		return err
	}
	return nil
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
	users, err := seed.ExistingUsers(ctx, conn)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table: no schema yet
		return nil
	case err != nil:
		return fmt.Errorf("count existing users: %w", err)
	case users > 0:
		return fmt.Errorf("%w: the database already holds %d users; smoke runs only on an empty database (a CI service container), and wrote nothing", ErrNotEmpty, users)
	}
	return nil
}

// queueProcess runs queue-process in process: the log transport
// (counting its lines, writing them nowhere), no pacing.
func queueProcess(ctx context.Context, pool *pgxpool.Pool, log zerolog.Logger, lines *atomic.Int64) (delivery.ProcessSummary, error) {
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

// tally is what the re-runs must not change.
type tally struct {
	transitions, messages int64
	byState               string
	byStatus              map[string]int64
}

func (s tally) String() string {
	return fmt.Sprintf("%d transitions, %d messages %v, users %s", s.transitions, s.messages, s.byStatus, s.byState)
}

func (s tally) equal(o tally) bool {
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

func counts(ctx context.Context, pool *pgxpool.Pool) (tally, error) {
	t := tally{byStatus: map[string]int64{}}
	c, err := countsQuery.One(ctx, pool, sqlfile.None{})
	if err != nil {
		return t, fmt.Errorf("count the outcome: %w", err)
	}
	t.transitions, t.messages, t.byState = c.Transitions, c.Messages, c.States
	statuses, err := queueStatusesQuery.All(ctx, pool, sqlfile.None{})
	if err != nil {
		return t, fmt.Errorf("count the queue: %w", err)
	}
	for _, r := range statuses {
		t.byStatus[r.Status] = r.Messages
	}
	return t, nil
}
