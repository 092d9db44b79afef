package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// RunRecord is a run recorded in engagement_job_runs that holds no lease:
// the runs of its job work alongside one another instead of taking turns
// (queue-process: any number of processes deliver at once, each claiming
// its own messages). Its row is a job's run's but for its status while in
// progress, 'delivering' (RunDelivering), which the unique index on running
// runs does not cover: a heartbeat, until Finish records its outcome and
// counters. A run that dies
// without recording one (kill -9, a lost machine) is marked abandoned by
// the next RecordRun of the job, by the rules a job's next run uses: its
// heartbeat silent for the lease timeout, or at once when its process ran
// on this machine and is gone.
//
// It costs the work it records one insert at the start (and the look for
// dead runs), one update at the end, and a heartbeat every third of the
// lease timeout on a pooled connection; every statement stands alone, so
// it works through transaction poolers.
type RunRecord struct{ r *run }

// RecordRun marks the dead runs of job abandoned and records a new run of
// it, as of asOf (nil: the database clock), renewing its heartbeat until
// Finish. leaseTimeout is how long another run's heartbeat may be silent
// before it counts as dead (DefaultLeaseTimeout when 0).
func RecordRun(ctx context.Context, pool *pgxpool.Pool, job string, asOf *time.Time, leaseTimeout time.Duration, log zerolog.Logger) (*RunRecord, error) {
	if leaseTimeout <= 0 {
		leaseTimeout = DefaultLeaseTimeout
	}
	r := &run{pool: pool, timeout: leaseTimeout, alongside: true}
	p := thisProcess()
	row, err := runRecordQuery.One(ctx, pool, runRecordArgs{Job: job, AsOf: asOf, Hostname: p.hostname, PID: p.pid, Holder: p.holder})
	if err != nil {
		return nil, fmt.Errorf("record the run: %w", err)
	}
	r.id = row.ID
	abandoned, err := abandonDead(ctx, pool, runHolderArgs{Job: job}, leaseTimeout)
	if err != nil {
		r.finishLost(ctx, err)
		return nil, err
	}
	for _, id := range abandoned {
		log.Warn().Int64("abandoned_run_id", id).Msg("an earlier run ended without recording its outcome; marked it abandoned")
	}
	beatCtx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	r.stop = func() { stop(context.Canceled) }
	r.done = make(chan struct{})
	go r.heartbeat(beatCtx, stop, log)
	return &RunRecord{r: r}, nil
}

// ID is the run's engagement_job_runs id.
func (rec *RunRecord) ID() int64 { return rec.r.id }

// Finish stops the heartbeat and records the run's outcome: failed with
// runErr (its text is stored: scrub secrets first), else partial or
// succeeded; counters (the run's summary) are stored as JSON. It records
// even when ctx is cancelled (a SIGTERM), within 10 seconds.
func (rec *RunRecord) Finish(ctx context.Context, counters any, partial bool, runErr error) error {
	return rec.r.finish(ctx, counters, partial, runErr)
}
