package scheduler

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
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
	// DryRun computes the counters from a read-only snapshot and writes nothing.
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
	// Logger receives one line per step and per run; per-user failures at error level.
	Logger zerolog.Logger
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
	return nil
}

// step is one set-based move of a job. selectSQL lists the users who qualify,
// each with a skip reason ("" when the step acts on them); moveSQL acts on a
// batch of them (@user_ids) in one statement, re-checking that each still
// qualifies, and returns how many users it moved and how many messages it
// queued. existingSQL, for steps that queue, counts the batch's idempotency
// keys already taken (dry runs report them as duplicates).
type step struct {
	name        string
	messageType string        // the type of message the step queues, if any
	args        pgx.NamedArgs // the step's own arguments, over the job's
	selectSQL   string
	moveSQL     string
	existingSQL string
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

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

// existingKeysSQL counts the batch's idempotency keys (user id followed by
// @key_suffix) that are already taken.
const existingKeysSQL = `
	SELECT count(*)::int FROM engagement_message_queue
	 WHERE idempotency_key = ANY(SELECT u.user_id::text || @key_suffix::text FROM unnest(@user_ids::uuid[]) AS u (user_id))`

// candidates are the users a step's selection found.
type candidates struct {
	ids     []pgtype.UUID
	skipped map[string]int
}

// runJob runs steps in order, each to completion, and sums their counters.
// args are the job-wide named arguments (as_of and friends); @run_id and
// @user_ids are added here.
func runJob(ctx context.Context, pool *pgxpool.Pool, job string, steps []step, args pgx.NamedArgs, cfg Config, sum *Summary) (err error) {
	start := time.Now()
	logCtx := cfg.Logger.With().Str("job", job).Time("as_of", cfg.AsOf).Bool("dry_run", cfg.DryRun)
	if cfg.Shard.Sharded() {
		sum.Shard = cfg.Shard.String()
		logCtx = logCtx.Str("shard", sum.Shard)
		args = withArgs(args, pgx.NamedArgs{"shard_index": cfg.Shard.Index, "shard_count": cfg.Shard.Count})
		for i := range steps {
			steps[i] = steps[i].sharded()
		}
	}
	log := logCtx.Logger()
	batchSize := cmp.Or(cfg.BatchSize, DefaultBatchSize)
	concurrency := cmp.Or(cfg.Concurrency, DefaultConcurrency)

	var r *run
	if !cfg.DryRun {
		if r, ctx, err = startRun(ctx, pool, job, cfg.Shard, cfg.AsOf, cfg.LeaseTimeout, log); err != nil {
			return err
		}
		defer r.release()
		sum.RunID = r.id
		log = log.With().Int64("run_id", r.id).Logger()
		args = withArgs(args, pgx.NamedArgs{"run_id": r.id})
	}
	log.Info().Msg("job started")

	// A dry run reads every step's users from one read-only snapshot: the
	// database refuses any write, and the counters describe one instant.
	var snapshot pgx.Tx
	if cfg.DryRun {
		snapshot, err = pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return fmt.Errorf("begin the dry run's snapshot: %w", err)
		}
		defer snapshot.Rollback(context.WithoutCancel(ctx))
	}

	for _, st := range steps {
		stepStart := time.Now()
		stepArgs := withArgs(args, st.args)
		var (
			counts Counts
			errs   []UserError
		)
		if cfg.DryRun {
			counts, err = dryRunStep(ctx, snapshot, st, stepArgs, batchSize)
		} else {
			counts, errs, err = runStep(ctx, pool, st, stepArgs, batchSize, concurrency, log)
		}
		if err != nil {
			err = fmt.Errorf("step %s: %w", st.name, err)
			break
		}
		sum.addStep(Step{Name: st.name, Counts: counts}, errs)
		if st.messageType != "" {
			sum.addMessages(st.messageType, counts)
		}
		log.Info().Str("step", st.name).Str("message_type", st.messageType).
			Int("processed", counts.Processed).Int("succeeded", counts.Succeeded).
			Int("failed", counts.Failed).Int("skipped", counts.Skipped).
			Int("queued", counts.Queued).Int("duplicates", counts.Duplicates).
			Int64("duration_ms", time.Since(stepStart).Milliseconds()).
			Msg("step finished")
	}
	sum.DurationMS = time.Since(start).Milliseconds()

	if r != nil {
		if finishErr := r.finish(ctx, sum, err); err == nil {
			err = finishErr
		}
	}
	if err != nil {
		return err
	}
	log.Info().
		Int("processed", sum.Processed).Int("succeeded", sum.Succeeded).
		Int("failed", sum.Failed).Int("skipped", sum.Skipped).
		Int("queued", sum.Queued).Int("duplicates", sum.Duplicates).
		Int64("duration_ms", sum.DurationMS).
		Msg("job finished")
	return nil
}

// runStep selects the step's users once, then moves them batch by batch,
// each batch one statement committed on its own: a run killed half-way keeps
// the batches it finished, and the next run's selection finds only the rest.
func runStep(ctx context.Context, pool *pgxpool.Pool, st step, args pgx.NamedArgs, batchSize, concurrency int, log zerolog.Logger) (Counts, []UserError, error) {
	cands, err := selectCandidates(ctx, pool, st, args)
	if err != nil {
		return Counts{}, nil, err
	}
	var counts Counts
	for reason, n := range cands.skipped {
		counts.skip(reason, n)
	}
	b := batcher{
		move: func(ctx context.Context, ids []pgtype.UUID) (moved, queued int, err error) {
			err = batchRow(ctx, pool, st.moveSQL, withArgs(args, pgx.NamedArgs{"user_ids": ids}), &moved, &queued)
			return moved, queued, err
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
	// Batches hold disjoint users, so they can run side by side without
	// waiting on each other's rows; the first error that stops the run
	// cancels the rest, and whatever committed stays committed.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for batch := range slices.Chunk(cands.ids, batchSize) {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return b.moveIsolating(gctx, batch) })
	}
	if err := g.Wait(); err != nil {
		return Counts{}, nil, err
	}
	slices.SortFunc(b.failures, func(x, y failure) int { return bytes.Compare(x.userID.Bytes[:], y.userID.Bytes[:]) })
	var errs []UserError
	for _, f := range b.failures {
		id := f.userID.String()
		log.Error().Str("step", st.name).Str("user_id", id).Str("error", f.err.Error()).Msg("user failed")
		errs = append(errs, UserError{UserID: id, Step: st.name, Error: f.err.Error()})
	}
	counts.Succeeded = b.moved
	counts.Failed = len(b.failures)
	counts.Processed = counts.Succeeded + counts.Failed
	counts.Queued = b.queued
	if st.existingSQL != "" {
		counts.Duplicates = b.moved - b.queued // moved users whose message key was already taken
	}
	counts.skip(SkipStateChanged, len(cands.ids)-counts.Processed)
	return counts, errs, nil
}

// dryRunStep counts what runStep would do, from the same selection, writing
// nothing: every selected user counts as succeeded, and for steps that queue,
// keys already taken count as duplicates.
func dryRunStep(ctx context.Context, db querier, st step, args pgx.NamedArgs, batchSize int) (Counts, error) {
	cands, err := selectCandidates(ctx, db, st, args)
	if err != nil {
		return Counts{}, err
	}
	var counts Counts
	for reason, n := range cands.skipped {
		counts.skip(reason, n)
	}
	counts.Succeeded = len(cands.ids)
	counts.Processed = counts.Succeeded
	if st.existingSQL != "" {
		for batch := range slices.Chunk(cands.ids, batchSize) {
			var existing int
			if err := db.QueryRow(ctx, st.existingSQL, batchExecMode, withArgs(args, pgx.NamedArgs{"user_ids": batch})).Scan(&existing); err != nil {
				return Counts{}, fmt.Errorf("count existing keys: %w", err)
			}
			counts.Duplicates += existing
		}
		counts.Queued = counts.Succeeded - counts.Duplicates
	}
	return counts, nil
}

// selectCandidates runs the step's selection: the ids it will act on (kept in
// memory: 17 bytes a user) and the count of users skipped per reason.
func selectCandidates(ctx context.Context, db querier, st step, args pgx.NamedArgs) (candidates, error) {
	rows, err := db.Query(ctx, st.selectSQL, args)
	if err != nil {
		return candidates{}, fmt.Errorf("select users: %w", err)
	}
	c := candidates{skipped: make(map[string]int)}
	var (
		id     pgtype.UUID
		reason string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &reason}, func() error {
		if reason == "" {
			c.ids = append(c.ids, id)
		} else {
			c.skipped[reason]++
		}
		return nil
	})
	if err != nil {
		return candidates{}, fmt.Errorf("select users: %w", err)
	}
	return c, nil
}

// withArgs returns base overlaid with extra, leaving both unchanged.
func withArgs(base, extra pgx.NamedArgs) pgx.NamedArgs {
	out := maps.Clone(base)
	if out == nil {
		out = pgx.NamedArgs{}
	}
	maps.Copy(out, extra)
	return out
}
