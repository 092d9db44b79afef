package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// Job run statuses (engagement_job_runs.status).
const (
	RunRunning    = "running"    // in progress, holding its job and shard's lease
	RunDelivering = "delivering" // in progress, holding no lease: queue-process's runs (RecordRun)
	RunSucceeded  = "succeeded"
	RunPartial    = "partial"   // completed, some users failed
	RunFailed     = "failed"    // stopped by a fatal error
	RunAbandoned  = "abandoned" // the process died; found by the next run
	// RunStopped is a job's run told to stop (SIGINT, SIGTERM): it
	// finished the batches in hand and recorded what it did; the next run
	// does the rest. Not a failure (migration 66).
	RunStopped = "stopped"
)

// RunInProgress reports whether a run of status has not ended: running (a
// job's, holding its lease) or delivering (queue-process's, alongside
// others).
func RunInProgress(status string) bool { return status == RunRunning || status == RunDelivering }

// DefaultLeaseTimeout is how long a run's heartbeat may be silent before the
// next run takes its lease over (Config.LeaseTimeout).
const DefaultLeaseTimeout = 30 * time.Second

// ErrLeaseLost stops a run whose lease another run took over: its heartbeat
// could not be renewed for a whole lease timeout (a network partition, a
// stalled process), so another run may be doing the work now.
var ErrLeaseLost = errors.New("lost the job's lease: the heartbeat was not renewed within the lease timeout, so another run may have taken over")

// run is one job run's bookkeeping: its engagement_job_runs row, which is
// also the lease that makes runs of the same job and shard take turns.
//
// The lease lives in the table, not in a session, so it works through
// transaction poolers: the unique index on running runs lets one run per job
// and shard be 'running'; the run renews heartbeat_at every third of the
// lease timeout; a run that finds the lease held waits, and takes it over
// once the holder is dead (its heartbeat silent for the lease timeout, or at
// once when the holder ran on this machine and its pid is gone). Every batch
// of the run holds the fence, a shared transaction-level advisory lock of
// the job and shard: before a run starts work it cancels the statements
// still running for an abandoned run (a killed process's last batch goes on
// on the server) and waits until none holds the fence.
type run struct {
	id       int64
	pool     *pgxpool.Pool
	fenceKey int64
	timeout  time.Duration // the lease timeout
	stop     context.CancelFunc
	done     chan struct{} // closed when the heartbeat has stopped
	// alongside says the run holds no lease (RecordRun): its heartbeat
	// only shows it alive, and never stops it.
	alongside bool
}

// lockKey is the fence key of a job's shard: stable across releases and
// processes, distinct per job and shard.
func lockKey(job string, shard Shard) int64 {
	h := fnv.New64a()
	h.Write([]byte("engagement-scheduler:" + job))
	if shard.Sharded() {
		h.Write([]byte(":shard:" + shard.String()))
	}
	return int64(h.Sum64())
}

// processHolder names this process's machine and pid namespace (boot id and
// pid namespace inode), or "" where that cannot be told: a run whose
// holder matches ours ran on this machine, so its pid can be checked.
var processHolder = func() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + ns
}()

// processGone reports whether pid surely does not exist on this machine.
func processGone(pid int) bool {
	if pid <= 0 || pid == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// startRun waits until no other run of job (and shard) is in progress,
// takes the lease, records this run, and returns it with a context that is
// cancelled (cause ErrLeaseLost) if the lease is lost. A run that finds
// another in progress waits for it, then does only what is left (usually
// nothing); one that finds a dead run marks it abandoned and takes over,
// after the dead run's statements are gone.
func startRun(ctx context.Context, pool *pgxpool.Pool, job string, shard Shard, asOf time.Time, leaseTimeout time.Duration, log zerolog.Logger) (*run, context.Context, error) {
	if leaseTimeout <= 0 {
		leaseTimeout = DefaultLeaseTimeout
	}
	r := &run{pool: pool, fenceKey: lockKey(job, shard), timeout: leaseTimeout}
	p := thisProcess()
	args := runStartArgs{Job: job, AsOf: asOf, Hostname: p.hostname, PID: p.pid, Shard: shardColumn(shard), Holder: p.holder}
	poll := min(leaseTimeout/10, time.Second)
	waiting, tookOver := false, false
	for {
		row, err := recordStart(ctx, pool, args)
		if err == nil {
			r.id = row.ID
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, fmt.Errorf("record the run: %w", err)
		}
		abandoned, err := abandonDead(ctx, pool, runHolderArgs{Job: job, Shard: args.Shard}, leaseTimeout)
		if err != nil {
			return nil, nil, err
		}
		if len(abandoned) != 0 {
			tookOver = true
			log.Warn().Int64("abandoned_run_id", abandoned[0]).Msg("the run in progress is dead; marked it abandoned and taking over")
			continue
		}
		if !waiting {
			waiting = true
			log.Info().Msg("another run of this job is in progress; waiting for it to finish")
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("wait for the run in progress: %w", context.Cause(ctx))
		case <-time.After(poll):
		}
	}

	if err := r.fence(ctx, tookOver, log); err != nil {
		r.finishLost(ctx, err)
		return nil, nil, err
	}
	// The run's work is stopped by a lost lease only: a stop (ctx
	// cancelled) lets the batches in hand finish (see runJob).
	runCtx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	r.stop = func() { stop(context.Canceled) }
	r.done = make(chan struct{})
	go r.heartbeat(runCtx, stop, log)
	return r, withFence(runCtx, r), nil
}

// recordStart records the run's row, or finds another run in progress
// (pgx.ErrNoRows). A stop does not cancel it halfway: a statement
// cancelled by a SIGTERM may have committed on the server after the client
// gave up, leaving a run recorded 'running' that nothing finishes (the next
// run marks it abandoned: a failure for the alerts). Bounded instead, so a
// database that does not answer still lets a stop through.
func recordStart(ctx context.Context, pool *pgxpool.Pool, args runStartArgs) (runStartRow, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return runStartQuery.One(ctx, pool, args)
}

// process is how a run's row names the process that runs it: its
// hostname, pid and holder (processHolder).
type process struct {
	hostname string
	pid      int
	holder   string
}

// thisProcess is this process, for the row of a run it starts.
func thisProcess() process {
	hostname, _ := os.Hostname()
	return process{hostname: hostname, pid: os.Getpid(), holder: processHolder}
}

// abandonDead marks the runs in progress of args' job and shard abandoned
// that are dead, and returns their ids (none when none is, or none runs).
// A job's runs take turns, so it has one in progress at most; the runs of
// queue-process work alongside one another, and each dead one is marked.
func abandonDead(ctx context.Context, pool *pgxpool.Pool, args runHolderArgs, leaseTimeout time.Duration) ([]int64, error) {
	running, err := runHolderQuery.All(ctx, pool, args)
	if err != nil {
		return nil, fmt.Errorf("look up the run in progress: %w", err)
	}
	var abandoned []int64 // none running: it just finished, try again
	for _, p := range running {
		var reason string
		switch {
		case p.NoHeartbeat:
			reason = "the run ended without recording an outcome (killed?)"
		case p.Holder != "" && p.Holder == processHolder && processGone(p.PID):
			reason = fmt.Sprintf("the run ended without recording an outcome: its process (pid %d) is gone (killed?)", p.PID)
		case time.Duration(p.SilentSeconds*float64(time.Second)) > leaseTimeout:
			reason = fmt.Sprintf("the run ended without recording an outcome: no heartbeat for %.0f s (killed?)", p.SilentSeconds)
		default:
			continue // alive, as far as anyone can tell
		}
		tag, err := runAbandonQuery.Exec(ctx, pool, runAbandonArgs{ID: p.ID, Beat: p.Beat, Reason: reason})
		if err != nil {
			return abandoned, fmt.Errorf("mark the dead run abandoned: %w", err)
		}
		if tag.RowsAffected() != 0 { // else it renewed its heartbeat or finished meanwhile
			abandoned = append(abandoned, p.ID)
		}
	}
	return abandoned, nil
}

// fence makes sure no statement of an earlier run of the job and shard is
// still running: after a takeover it cancels them (a killed process's batch
// runs on until the server notices), then it waits until none holds the
// fence.
func (r *run) fence(ctx context.Context, cancel bool, log zerolog.Logger) error {
	if cancel {
		row, err := runFenceCancelQuery.One(ctx, r.pool, runFenceCancelArgs{FenceKey: r.fenceKey})
		if err != nil {
			return fmt.Errorf("cancel the abandoned run's statements: %w", err)
		}
		if row.Cancelled > 0 {
			log.Warn().Int("statements", row.Cancelled).Msg("cancelled the abandoned run's statements still running on the server")
		}
	}
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		_, err := runFenceWaitQuery.Exec(ctx, tx, runFenceWaitArgs{FenceKey: r.fenceKey})
		return err
	})
	if err != nil {
		return fmt.Errorf("wait for the earlier run's statements: %w", err)
	}
	return nil
}

// heartbeat renews the lease every third of the lease timeout until the run
// is released. If the lease is gone, or could not be renewed for a whole
// lease timeout (another run may take over), it stops the run with
// ErrLeaseLost.
func (r *run) heartbeat(ctx context.Context, stop context.CancelCauseFunc, log zerolog.Logger) {
	defer close(r.done)
	interval := r.timeout / 3
	renewed := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		beatCtx, cancel := context.WithTimeout(ctx, interval)
		_, err := runHeartbeatQuery.One(beatCtx, r.pool, runHeartbeatArgs{ID: r.id})
		cancel()
		switch {
		case err == nil:
			renewed = time.Now()
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, pgx.ErrNoRows) && r.alongside:
			log.Warn().Msg("another run found this run's heartbeat silent and marked it abandoned; its outcome is still recorded when it ends")
			return
		case errors.Is(err, pgx.ErrNoRows):
			log.Error().Msg("the run's lease was taken over by another run; stopping")
			stop(ErrLeaseLost)
			return
		}
		log.Warn().Str("error", err.Error()).Msg("could not renew the run's lease; retrying")
		if !r.alongside && time.Since(renewed) > r.timeout {
			stop(ErrLeaseLost)
			return
		}
	}
}

// finish records the run's outcome, which also ends its lease: failed with
// runErr, else partial or succeeded; counters is its summary, written as
// JSON. It runs even when ctx was cancelled, so an interrupted run is
// still written down.
func (r *run) finish(ctx context.Context, counters any, partial bool, runErr error) error {
	status := RunSucceeded
	var errText *string
	switch {
	case runErr != nil:
		status = RunFailed
		msg := runErr.Error()
		errText = &msg
	case partial:
		status = RunPartial
	}
	return r.record(ctx, status, counters, errText)
}

// record writes the run's outcome (see finish).
func (r *run) record(ctx context.Context, status string, sum any, errText *string) error {
	counters, err := json.Marshal(sum)
	if err != nil {
		return fmt.Errorf("encode run counters: %w", err)
	}
	r.stopHeartbeat()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// counters is JSON text (@counters::text::jsonb): as []byte, pgx's exec
	// mode would send it as bytea, which a json column rejects (22P02).
	text := string(counters)
	args := runFinishArgs{ID: r.id, Status: status, Counters: &text, Error: errText}
	_, err = runFinishQuery.Exec(ctx, r.pool, args)
	if err != nil && postgres.IsConnectionLost(err) {
		// The connection was ended (an administrator, a failover) while the
		// batches went on; what they did is committed, so record it through
		// a new connection.
		r.pool.Reset()
		_, err = runFinishQuery.Exec(ctx, r.pool, args)
	}
	if err != nil {
		return fmt.Errorf("record the run's outcome: %w", err)
	}
	return nil
}

// finishLost records a run that could not start work as failed, or as
// stopped when it was told to stop (ctx cancelled) meanwhile.
func (r *run) finishLost(ctx context.Context, runErr error) {
	status, msg := RunFailed, runErr.Error()
	errText := &msg
	if ctx.Err() != nil {
		status, errText = RunStopped, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = runFinishQuery.Exec(ctx, r.pool, runFinishArgs{ID: r.id, Status: status, Counters: nil, Error: errText})
}

func (r *run) stopHeartbeat() {
	if r.stop != nil {
		r.stop()
		<-r.done
	}
}

// release stops the heartbeat. A run that did not record its outcome stays
// 'running' until its lease times out, as a killed run does.
func (r *run) release() { r.stopHeartbeat() }

type fenceCtxKey struct{}

// withFence returns ctx carrying run r, whose fence the batches run under.
func withFence(ctx context.Context, r *run) context.Context {
	return context.WithValue(ctx, fenceCtxKey{}, r)
}

// batchRow runs a batch statement s (one that moves users and returns one
// row) with p in a transaction of its own, and returns its row. Under a
// run's context it holds the run's fence and a server-side statement
// timeout (SET LOCAL: nothing is left on the session) in the same
// transaction: both go in one round trip with the statement (a pipeline
// ending in one Sync is one transaction), so a pooler keeps them on one
// server connection. Without one, s runs alone, in s's mode.
func batchRow[P sqlfile.Params, R any, PR sqlfile.Row[R]](ctx context.Context, pool *pgxpool.Pool, s sqlfile.Statement[P, R, PR], p P) (R, error) {
	r, ok := ctx.Value(fenceCtxKey{}).(*run)
	if !ok {
		return s.One(ctx, pool, p)
	}
	var timeout *string // pools not made by postgres.Open keep their own
	if d := postgres.StatementTimeout(ctx, pool); d > 0 {
		ms := strconv.FormatInt(d.Milliseconds(), 10)
		timeout = &ms
	}
	b := &pgx.Batch{}
	runFenceBatchQuery.QueueExec(b, runFenceBatchArgs{FenceKey: r.fenceKey, TimeoutMs: timeout})
	var row R
	s.QueueOne(b, p, &row)
	err := pool.SendBatch(ctx, b).Close()
	// QueueOne puts the statement's name before its error; a failing
	// row's error is reported as the database said it, as it always was
	// (the summary's errors).
	if inner := errors.Unwrap(err); inner != nil && err.Error() == s.Name+": "+inner.Error() {
		err = inner
	}
	return row, err
}

// shardColumn is engagement_job_runs.shard: "i/N", or NULL when unsharded.
func shardColumn(s Shard) *string {
	if !s.Sharded() {
		return nil
	}
	v := s.String()
	return &v
}
