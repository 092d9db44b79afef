package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/recovered"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Defaults of Config.
const (
	// DefaultBatchSize is how many users one statement moves.
	DefaultBatchSize = 5000
	// DefaultConcurrency is how many batches run at once, each on its own
	// connection: two keep a small database server's cores busy.
	DefaultConcurrency = 2
)

// Config configures a job run.
type Config struct {
	// AsOf is the instant the run treats as now; required. Day and week keys
	// use its UTC date and ISO week.
	AsOf time.Time
	// DryRun computes the counters with the steps' own statements, their
	// writes switched off, in one snapshot, and writes nothing (see
	// dryRunStep).
	DryRun bool
	// BatchSize is how many users one statement moves (DefaultBatchSize when 0).
	BatchSize int
	// Concurrency is how many batches run at once, each on its own pooled
	// connection (DefaultConcurrency when 0). The pool needs one connection
	// more, for the job's lock.
	Concurrency int
	// Shard limits the run to the users whose id hashes to it (the zero
	// Shard: every user). Runs of different shards of a job run side by side.
	Shard Shard
	// LeaseTimeout is how long a run's heartbeat may be silent before the
	// next run of the job (and shard) takes it over as dead
	// (DefaultLeaseTimeout when 0). A killed run on another machine blocks
	// the next for about this long; on the same machine, not at all.
	LeaseTimeout time.Duration
	// SendReminder makes the daily job queue the reminder a "remind me
	// later" promised when remind_at comes, as the user goes dormant
	// (engagement-daily --send-reminder). Off by default: the user goes
	// dormant silently (AC-5.1.3).
	SendReminder bool
	// Holdout is the goodbye's control group (engagement-daily
	// --holdout-percent, --holdout-salt): the zero value holds out nobody.
	Holdout Holdout
	// BestHour schedules each goodbye at its user's hour (engagement-daily
	// --best-hour, --best-hour-percent): the zero value is off.
	BestHour BestHour
	// Variants are the copy variants of the kinds the job queues, by
	// message type (sender.Catalog.Variants; the goodbye's for now): each
	// user gets one by a hash of their id, recorded on the message and
	// its log row. None: the kind's one text.
	Variants map[string][]sender.Variant
	// Logger receives one line per step and per run; per-user failures at error level.
	Logger zerolog.Logger
	// Machine is the state machine whose timers the daily job runs, one
	// step each, and whose kinds they queue: the shipped tables
	// (statemachine.Default, the zero value) in the binaries.
	Machine sm.Machine
}

// Validate reports a configuration the job cannot run with.
func (c Config) Validate() error {
	if c.AsOf.IsZero() {
		return errors.New("as-of instant is required")
	}
	if c.BatchSize < 0 {
		return fmt.Errorf("batch size must be positive, got %d", c.BatchSize)
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("concurrency must be positive, got %d", c.Concurrency)
	}
	if c.Shard != (Shard{}) {
		if _, err := NewShard(c.Shard.Index, c.Shard.Count); err != nil {
			return err
		}
	}
	if err := c.Holdout.Validate(); err != nil {
		return err
	}
	return c.BestHour.Validate()
}

// step is one set-based move of a job.
//
// Its move statement moves the step's users among the
// user_engagement_states rows whose position (ctid) lies in [@first,
// @end), in one statement that finds them, locks them (skipping rows
// another transaction holds) and moves them, and returns the chunk's
// counters (batchCounts). With @dry_run it is the step's dry run: it locks
// and writes nothing and returns the counters of what it would do, every
// row taken to be free (dryRunStep runs it over the whole table). One
// statement says who a step takes, for the run and for its dry run alike.
type step struct {
	name        string
	messageType string // the type of message the step queues, if any
	move        mover  // the move statement, with the step's own arguments
}

// moveArgs are what a run gives every step's move statement, whatever the
// step: the rows it moves, [first, end) (a chunk, or every row in a dry
// run), the run's shard (one of one: every user), its run (nil in a dry
// run, which logs nothing), whether it is a dry run, and whether to name
// the keys it found already taken (with debug logs on).
type moveArgs struct {
	first, end             pgtype.TID
	shardIndex, shardCount int
	runID                  *int64
	dryRun, logDuplicates  bool
}

// mover is a step's move statement, its step's own arguments bound, that
// runs with a run's moveArgs.
type mover interface {
	// run moves the users of one chunk in a transaction of its own, under
	// the run's fence when ctx carries one (batchRow).
	run(ctx context.Context, pool *pgxpool.Pool, m moveArgs) (batchCounts, error)
	// count runs it alone in db, for a dry run (dryRunStep).
	count(ctx context.Context, db postgres.Querier, m moveArgs) (batchCounts, error)
	// bind is the statement with its arguments, for a test to EXPLAIN.
	bind(m moveArgs) sqlfile.Bound
}

// moveRow is the row queries.gen.go declares for each move statement:
// every one returns the same counters under the same names, so its row
// has batchCounts' fields, and batchCounts(row) reads any of them.
type moveRow interface {
	~struct {
		Candidates    int
		Moved         int
		Queued        int
		Locked        int
		OptedOut      int
		NoDestination int
		HeldOut       int
		DuplicateKeys []string
	}
}

// moveBy is a step's mover: move statement s, its arguments filled by args
// from a run's moveArgs and the step's own values.
func moveBy[P sqlfile.Params, R moveRow, PR sqlfile.Row[R]](s sqlfile.Statement[P, R, PR], args func(moveArgs) P) mover {
	return move[P, R, PR]{statement: s.WithMode(batchExecMode), args: args}
}

type move[P sqlfile.Params, R moveRow, PR sqlfile.Row[R]] struct {
	statement sqlfile.Statement[P, R, PR]
	args      func(moveArgs) P
}

func (mv move[P, R, PR]) run(ctx context.Context, pool *pgxpool.Pool, m moveArgs) (batchCounts, error) {
	row, err := batchRow(ctx, pool, mv.statement, mv.args(m))
	return batchCounts(row), err
}

func (mv move[P, R, PR]) count(ctx context.Context, db postgres.Querier, m moveArgs) (batchCounts, error) {
	row, err := mv.statement.One(ctx, db, mv.args(m))
	return batchCounts(row), err
}

func (mv move[P, R, PR]) bind(m moveArgs) sqlfile.Bound { return mv.statement.Bind(mv.args(m)) }

// batchExecMode runs batch statements as unnamed prepared statements, which
// PostgreSQL plans for the actual parameters every time. A cached statement
// switches to a generic plan after five runs, and a generic plan guesses that
// an array of 5,000 ids holds a handful: its nested loops turned a 100 ms
// batch of weekly reviews into 26 s. Planning costs a few milliseconds.
// Exec mode (not describe-exec) sends the statement in one round trip: a
// transaction pooler may hand the second round trip of describe-exec to
// another server connection ("bind message supplies 5 parameters, but
// prepared statement "" requires 3").
const batchExecMode = pgx.QueryExecModeExec

// StoppedShutdown is Summary.Stopped of a run told to stop (SIGINT,
// SIGTERM: the context the job was given cancelled), as queue-process's
// summary says it.
const StoppedShutdown = "shutdown"

// runJob runs steps in order, each to completion, and sums their counters.
// The steps' statements take the run's shard and run id (moveArgs) from
// here.
//
// ctx cancelled (SIGINT, SIGTERM) stops the run, which is no failure: the
// batches in hand finish and are counted (each is one transaction, so a
// user is moved whole or not at all), no new one starts, the run is
// recorded stopped with what it did, and runJob returns nil with
// sum.Stopped set. The next run does the rest. A stop before the run is
// recorded (while it waits for another run of the job) records nothing.
func runJob(ctx context.Context, pool *pgxpool.Pool, job string, steps []step, cfg Config, sum *Summary) (err error) {
	start := time.Now()
	j := &jobRun{pool: pool, dryRun: cfg.DryRun, sum: sum,
		batchSize:   cmp.Or(cfg.BatchSize, DefaultBatchSize),
		concurrency: cmp.Or(cfg.Concurrency, DefaultConcurrency),
		// stop is the caller's context: cancelled, the run stops between
		// batches. The batches run under startRun's context, which only a
		// lost lease cancels.
		stop: ctx,
	}
	j.scope(job, cfg)

	var r *run
	if !cfg.DryRun {
		if r, ctx, err = startRun(ctx, pool, job, cfg.Shard, cfg.AsOf, cfg.LeaseTimeout, j.log); err != nil {
			if j.stopped(err) {
				j.log.Info().Str("reason", err.Error()).Msg("told to stop before the run started; nothing done")
				return nil
			}
			return err
		}
		defer r.release()
		sum.RunID = r.id
		j.log = j.log.With().Int64("run_id", r.id).Logger()
		j.m.runID = &r.id
	}
	log := j.log
	log.Info().Msg("job started")
	defer context.AfterFunc(j.stop, func() {
		log.Info().Msg("told to stop (SIGTERM or SIGINT): the batches in hand finish, then the run stops; the next run does the rest")
	})()

	if cfg.DryRun {
		if j.snapshot, err = beginDryRun(ctx, pool); err != nil {
			if j.stopped(err) {
				return nil
			}
			return fmt.Errorf("begin the dry run's snapshot: %w", err)
		}
		defer j.snapshot.Rollback(context.WithoutCancel(ctx))
	}

	err = j.runSteps(ctx, steps)
	sum.DurationMS = time.Since(start).Milliseconds()

	if r != nil {
		if finishErr := r.recordEnd(ctx, sum, err); err == nil {
			err = finishErr
		}
	}
	if err != nil {
		return err
	}
	logJobFinished(log, sum)
	return nil
}

// recordEnd records how the run ended: stopped, with what it did, when it
// was told to stop and nothing failed; otherwise finished, or failed with
// err.
func (r *run) recordEnd(ctx context.Context, sum *Summary, err error) error {
	if err == nil && sum.Stopped != "" {
		return r.record(ctx, RunStopped, sum, nil)
	}
	return r.finish(ctx, sum, sum.Partial(), err)
}

// jobRun is one run of a job under way: what its steps share (the pool,
// the caller's stop, a dry run's snapshot, the statements' arguments, the
// logger) and the summary they add their counters to.
type jobRun struct {
	pool        *pgxpool.Pool
	stop        context.Context
	dryRun      bool
	snapshot    pgx.Tx // a dry run's; nil in a real run
	m           moveArgs
	batchSize   int
	concurrency int
	log         zerolog.Logger
	sum         *Summary
}

// scope gives the run its logger's fields and its statements' shard: the
// job, the day it runs as of, whether it is a dry run, and its shard when
// the job is sharded.
func (j *jobRun) scope(job string, cfg Config) {
	logCtx := cfg.Logger.With().Str("job", job).Time("as_of", cfg.AsOf).Bool("dry_run", cfg.DryRun)
	// Every statement takes the shard as a parameter; one shard of one is
	// every user.
	j.m = moveArgs{shardIndex: 0, shardCount: 1}
	if cfg.Shard.Sharded() {
		j.sum.Shard = cfg.Shard.String()
		logCtx = logCtx.Str("shard", j.sum.Shard)
		j.m.shardIndex, j.m.shardCount = cfg.Shard.Index, cfg.Shard.Count
	}
	j.log = logCtx.Logger()
}

// stopped says whether the run was told to stop (its caller's context
// cancelled) and err, if any, is only the stop's own doing; it then marks
// the summary stopped, so that a stop is recorded as such, not as a
// failure.
func (j *jobRun) stopped(err error) bool {
	if j.stop.Err() == nil || (err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errStopped)) {
		return false
	}
	j.sum.Stopped = StoppedShutdown
	return true
}

// beginDryRun opens a dry run's snapshot. A dry run reads every step's
// users from one snapshot, so the counters describe one instant, in a
// transaction that is always rolled back. It is not READ ONLY: PostgreSQL
// refuses to run a statement that could write (the steps' own) in a
// read-only transaction even when it writes nothing (see dryRunStep). It
// writes nothing, so a stop cancels its statement at once.
func beginDryRun(ctx context.Context, pool *pgxpool.Pool) (pgx.Tx, error) {
	return pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
}

// runSteps runs the steps in order, each to completion, adding each one's
// counters to the summary, until one fails or the run is told to stop.
func (j *jobRun) runSteps(ctx context.Context, steps []step) (err error) {
	for _, st := range steps {
		if j.stopped(nil) {
			break
		}
		stepStart := time.Now()
		var (
			counts Counts
			errs   []UserError
			cut    bool
		)
		if j.dryRun {
			counts, err = dryRunStep(ctx, j.snapshot, st, j.m)
			if err != nil && j.stopped(err) {
				err = nil
				break
			}
		} else {
			counts, errs, cut, err = runStep(ctx, j.stop, j.pool, st, j.m, j.batchSize, j.concurrency, j.log)
		}
		if err != nil {
			return fmt.Errorf("step %s: %w", st.name, err)
		}
		j.sum.AddStep(Step{Name: st.name, Counts: counts}, errs)
		if st.messageType != "" {
			j.sum.AddMessages(st.messageType, counts)
		}
		logStepFinished(j.log, st, counts, cut, time.Since(stepStart))
		if cut {
			j.stopped(nil)
			break
		}
	}
	return err
}

// logStepFinished writes a step's line: its counters and how long it
// took, and whether it was stopped part-way.
func logStepFinished(log zerolog.Logger, st step, counts Counts, cut bool, took time.Duration) {
	msg := "step finished"
	if cut {
		msg = "step stopped part-way; the next run does the rest"
	}
	log.Info().Str("step", st.name).Str("message_type", st.messageType).
		Int("processed", counts.Processed).Int("succeeded", counts.Succeeded).
		Int("failed", counts.Failed).Int("skipped", counts.Skipped).
		Int("queued", counts.Queued).Int("duplicates", counts.Duplicates).Int("held_out", counts.HeldOut).
		Int64("duration_ms", took.Milliseconds()).
		Msg(msg)
}

// logJobFinished writes the run's last line: the job's counters summed
// over its steps, and whether it finished or was stopped.
func logJobFinished(log zerolog.Logger, sum *Summary) {
	msg := "job finished"
	if sum.Stopped != "" {
		msg = "job stopped"
	}
	log.Info().
		Int("processed", sum.Processed).Int("succeeded", sum.Succeeded).
		Int("failed", sum.Failed).Int("skipped", sum.Skipped).
		Int("queued", sum.Queued).Int("duplicates", sum.Duplicates).
		Str("stopped", sum.Stopped).Int64("duration_ms", sum.DurationMS).
		Msg(msg)
}

// runStep moves the step's users chunk by chunk: each chunk is a range of
// user_engagement_states' pages, and one statement, committed on its own,
// finds the step's users in it and moves them. The job never holds more
// than the chunks in flight, whatever the number of users, and a run killed
// half-way keeps the chunks it finished; the next run finds only the rest.
//
// Chunks are sized to hold about batchSize of the step's users, from the
// density of the chunks finished so far. The pages are walked once, in
// order, each chunk reading only its own: a step costs one pass over the
// table however many chunks it takes. Rows put past the last page while the
// step runs (by the bot, or the step's own moves) wait for the next run.
//
// stop cancelled, no chunk starts after it; the chunks in hand finish
// (under ctx) and are counted, and cut says the step was left part-way.
func runStep(ctx, stop context.Context, pool *pgxpool.Pool, st step, m moveArgs, batchSize, concurrency int, log zerolog.Logger) (c Counts, errs []UserError, cut bool, err error) {
	table, err := jobTablePagesQuery.One(ctx, pool, sqlfile.None{})
	if err != nil {
		return Counts{}, nil, false, fmt.Errorf("measure user_engagement_states: %w", err)
	}
	blocks := table.Pages
	// With debug logs on, each batch also lists the keys it found taken
	// (the story's T9: which duplicate, first queued when).
	m.logDuplicates, m.dryRun = log.Debug().Enabled(), false
	b := batcher{
		stop: stop,
		move: func(ctx context.Context, s span) (batchCounts, error) {
			chunk := m
			chunk.first, chunk.end = s.tids()
			c, err := st.move.run(ctx, pool, chunk)
			if err == nil && len(c.DuplicateKeys) > 0 { // listed only when debug logs are on
				logDuplicates(ctx, pool, log, st.name, c.DuplicateKeys)
			}
			return c, err
		},
		userAt: func(ctx context.Context, at pgtype.TID) (string, error) {
			row, err := jobUserAtQuery.One(ctx, pool, jobUserAtArgs{At: at})
			return row.UserID, err
		},
		lost: func(attempt int, err error) {
			log.Warn().Str("step", st.name).Int("attempt", attempt).Str("error", err.Error()).
				Msg("a batch lost its database connection; retrying it on a new one")
			// The pool's idle connections most likely went with it (a
			// failover, a restart, an administrator ending the job's
			// sessions): the retry dials afresh.
			pool.Reset()
		},
	}
	// Chunks hold disjoint rows, so they can run side by side without
	// waiting on each other's rows; the first error that stops the run
	// cancels the rest, and whatever committed stays committed.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	size := chunkSizer{target: batchSize}
	next := int64(0)
	for next < blocks {
		if gctx.Err() != nil || stop.Err() != nil {
			break
		}
		n := min(size.blocks(b.density()), blocks-next)
		chunk := pageSpan(next, next+n)
		next += n
		g.Go(recovered.Func(func() error { return b.moveIsolating(gctx, chunk) }))
	}
	switch err := g.Wait(); {
	case errors.Is(err, errStopped):
		cut = true // a batch whose connection was lost was not retried
	case err != nil:
		return Counts{}, nil, false, err
	case next < blocks:
		cut = true
	}
	return st.counts(b.total, len(b.failures)), userErrors(log, st.name, b.failures), cut, nil
}

// userErrors logs a step's failed users, in the order of their ids so that
// a run's lines and summary read the same way every time, and returns them
// as the summary lists them.
func userErrors(log zerolog.Logger, step string, failures []failure) (errs []UserError) {
	slices.SortFunc(failures, func(x, y failure) int { return cmp.Compare(x.userID, y.userID) })
	for _, f := range failures {
		id := f.userID // "": the failing row moved before it could be named
		log.Error().Str("step", step).Str("user_id", id).Str("error", f.err.Error()).Msg("user failed")
		errs = append(errs, UserError{UserID: id, Step: step, Error: f.err.Error()})
	}
	return errs
}

// counts are the step's counters from its statement's, summed over its
// chunks (or its dry run's), and the users who failed alone.
func (st step) counts(t batchCounts, failed int) Counts {
	var counts Counts
	counts.Succeeded = t.Moved
	counts.Failed = failed
	counts.Processed = counts.Succeeded + counts.Failed
	counts.Queued = t.Queued
	counts.HeldOut = t.HeldOut
	if st.messageType != "" {
		// moved users, not held out, whose message key was already taken
		counts.Duplicates = t.Moved - t.HeldOut - t.Queued
	}
	counts.Skip(sm.SkipOptedOut, t.OptedOut)
	counts.Skip(sm.SkipNoDestination, t.NoDestination)
	counts.Skip(sm.SkipLocked, t.Locked)
	// Users the chunk found and locked but did not move: the bot changed
	// them in the instant between (the statement re-checks each one).
	counts.Skip(sm.SkipStateChanged, t.Candidates-t.OptedOut-t.NoDestination-t.Locked-t.Moved)
	return counts
}

// logDuplicates writes a debug line per key a batch found already taken,
// with when and by which run its message was first queued. It only reads,
// after the batch committed; a failure to read is a line of its own, never
// the run's.
func logDuplicates(ctx context.Context, pool *pgxpool.Pool, log zerolog.Logger, step string, keys []string) {
	err := jobDuplicatesQuery.Each(ctx, pool, jobDuplicatesArgs{Keys: keys}, func(d *jobDuplicatesRow) error {
		ev := log.Debug().Str("step", step).Str("idempotency_key", d.IdempotencyKey).Str("message_type", d.MessageType).
			Time("first_queued_at", d.FirstQueuedAt)
		if d.FirstRunID != nil {
			ev = ev.Int64("first_run_id", *d.FirstRunID)
		}
		ev.Msg("duplicate skipped: already queued")
		return nil
	})
	if err != nil {
		log.Debug().Str("step", step).Str("error", err.Error()).Msg("duplicates skipped; could not read when they were first queued")
	}
}

// wholeTable is every row of user_engagement_states as @first and @end:
// no row lies at or past the last position of the last block number.
var wholeTable = [2]pgtype.TID{
	{Valid: true},
	{BlockNumber: math.MaxUint32, OffsetNumber: math.MaxUint16, Valid: true},
}

// dryRunStep counts what runStep would do: the step's own statement with
// @dry_run, once over the whole table, in db (a transaction the caller
// rolls back; not READ ONLY, which PostgreSQL refuses for a statement
// that could write, even one that writes nothing). The statement locks no
// row and writes none (no transaction id is even assigned): it takes
// every row to be free, so none counts as locked, and every user it
// selects as moved, with their message counted as queued when its key is
// not taken yet and as a duplicate when it is. The database counts; no
// user id comes to the client. m gives the run's shard; the rows, the run
// and the flags are the dry run's own.
func dryRunStep(ctx context.Context, db postgres.Querier, st step, m moveArgs) (Counts, error) {
	m.first, m.end = wholeTable[0], wholeTable[1]
	m.runID, m.dryRun, m.logDuplicates = nil, true, false // no duplicate is named in a dry run
	t, err := st.move.count(ctx, db, m)
	if err != nil {
		return Counts{}, fmt.Errorf("count users: %w", err)
	}
	return st.counts(t, 0), nil
}
