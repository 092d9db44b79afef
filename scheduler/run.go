package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// Job run statuses (engagement_job_runs.status).
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunPartial   = "partial"   // completed, some users failed
	RunFailed    = "failed"    // stopped by a fatal error
	RunAbandoned = "abandoned" // the process died; found by the next run
)

// run is one job run's bookkeeping: the job's session advisory lock, which
// serialises runs of the same job, and its engagement_job_runs row.
type run struct {
	id   int64
	lock *pgxpool.Conn
	pool *pgxpool.Pool // records the outcome if the lock's connection was lost
}

// lockKey is the advisory lock key of a job's shard: stable across
// releases and processes, distinct per job and shard, so runs of one shard
// take turns while different shards run side by side.
func lockKey(job string, shard Shard) int64 {
	h := fnv.New64a()
	h.Write([]byte("engagement-scheduler:" + job))
	if shard.Sharded() {
		h.Write([]byte(":shard:" + shard.String()))
	}
	return int64(h.Sum64())
}

// startRun waits until no other run of job is in progress, marks runs that
// died without finishing as abandoned, and records this one.
//
// The lock is a session lock on a connection held for the whole run: it is
// released when the run ends or when its process dies, so a killed run never
// blocks the next. A run that finds another in progress waits for it, then
// does only what is left (usually nothing). All of this is per shard: a
// sharded run waits only for runs of its own shard, and marks only its own
// shard's dead runs abandoned.
func startRun(ctx context.Context, pool *pgxpool.Pool, job string, shard Shard, asOf time.Time, log zerolog.Logger) (*run, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire connection: %w", err)
	}
	r := &run{lock: conn, pool: pool}
	key := lockKey(job, shard)
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&locked); err != nil {
		r.release()
		return nil, fmt.Errorf("take the %s lock: %w", job, err)
	}
	if !locked {
		log.Info().Msg("another run of this job is in progress; waiting for it to finish")
		// The wait is bounded by ctx (a signal, --max-duration), not by the
		// pool's statement timeout.
		if _, err := conn.Exec(ctx, `SET statement_timeout = 0`); err != nil {
			r.release()
			return nil, fmt.Errorf("take the %s lock: %w", job, err)
		}
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
			r.release()
			return nil, fmt.Errorf("wait for the %s lock: %w", job, err)
		}
	}

	hostname, _ := os.Hostname()
	err = conn.QueryRow(ctx, `
		WITH abandoned AS (
		    UPDATE engagement_job_runs
		       SET status = 'abandoned', finished_at = now(),
		           error = 'the run ended without recording an outcome (killed?)'
		     WHERE job = $1 AND status = 'running' AND shard IS NOT DISTINCT FROM $5
		)
		INSERT INTO engagement_job_runs (job, as_of, hostname, pid, shard)
		VALUES ($1, $2, $3, $4, $5)
		RETURNING id`,
		job, asOf, hostname, os.Getpid(), shardColumn(shard),
	).Scan(&r.id)
	if err != nil {
		r.release()
		return nil, fmt.Errorf("record the run: %w", err)
	}
	return r, nil
}

// finish records the run's outcome. It runs even when ctx was cancelled, so
// an interrupted run is still written down.
func (r *run) finish(ctx context.Context, sum *Summary, runErr error) error {
	status := RunSucceeded
	var errText *string
	switch {
	case runErr != nil:
		status = RunFailed
		msg := runErr.Error()
		errText = &msg
	case sum.Partial():
		status = RunPartial
	}
	counters, err := json.Marshal(sum)
	if err != nil {
		return fmt.Errorf("encode run counters: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	const record = `
		UPDATE engagement_job_runs
		   SET finished_at = now(), status = $2, counters = $3, error = $4
		 WHERE id = $1`
	_, err = r.lock.Exec(ctx, record, r.id, status, counters, errText)
	if err != nil && postgres.IsConnectionLost(err) {
		// The lock's session was ended (an administrator, a failover) while
		// the batches went on; what they did is committed, so record it
		// through a new connection.
		r.pool.Reset()
		_, err = r.pool.Exec(ctx, record, r.id, status, counters, errText)
	}
	if err != nil {
		return fmt.Errorf("record the run's outcome: %w", err)
	}
	return nil
}

// release drops the lock by closing its connection (which also discards the
// session settings the wait changed).
func (r *run) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn := r.lock.Hijack()
	_ = conn.Close(ctx)
}

// shardColumn is engagement_job_runs.shard: "i/N", or NULL when unsharded.
func shardColumn(s Shard) *string {
	if !s.Sharded() {
		return nil
	}
	v := s.String()
	return &v
}
