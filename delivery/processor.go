// Package delivery is queue-process's engine: it claims due messages from
// the queue (FOR UPDATE SKIP LOCKED, under a lease per process), checks each
// against its user as they are now (the send-time rules of
// statemachine.Kinds) when claimed and again just before its send, renders
// it from the catalog and sends it through a transport (package
// sender/transport), with retries, backoff, a pace shared
// by every process, quiet hours in the user's time zone, and a send ledger
// that keeps a message from going out twice when a worker dies mid-send.
package delivery

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/engagement-scheduler/engagement"
	"github.com/engagement-scheduler/engagement/internal/recovered"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/idempotency"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/sender"
	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Defaults of ProcessorConfig, as the contract has them.
const (
	DefaultSendInterval = 500 * time.Millisecond
	DefaultMaxRetries   = 3
	DefaultRetryBase    = time.Second
	DefaultClaimTimeout = engagement.DefaultClaimTimeout
	// MinClaimTimeout is the shortest claim timeout: a claim must outlive
	// the statements that take and renew it several times over.
	MinClaimTimeout = time.Second
	// DefaultWorkers is how many sends a processor keeps in flight, paced
	// or not. 16 measured best unpaced on 2 cores (32 was slower), and
	// keeps 80 messages/s against a receiver answering in 200 ms; a paced
	// run needs at least rate × receiver latency (docs/BENCHMARKS.md).
	DefaultWorkers = 16
	// How many messages a worker claims at a time. Without pacing, on a
	// transport that de-duplicates (batched recording), a claim and a
	// record are one statement each however large the batch, and their
	// fixed cost is what bounds the rate: 400 delivered about 1.6 times as
	// fast as 50 (docs/BENCHMARKS.md). Without pacing on a transport that
	// cannot de-duplicate, every send has statements of its own anyway,
	// so a smaller claim holds fewer messages a killed worker's claims
	// would delay. With pacing, messages leave one interval apart and a
	// small claim leaves the rest to other processes.
	DefaultBatchedClaimBatch = 400
	DefaultClaimBatch        = 50
	DefaultPacedClaimBatch   = 4
	// DefaultKindPriorityMaxWait is how long a message may wait under
	// KindPriority before it goes first whatever its kind: longer than a
	// goodbye's 48 hours, shorter than a weekly review's week.
	DefaultKindPriorityMaxWait = 72 * time.Hour
	// DefaultPerUserCapWindow is the per-user cap's window: a week, as
	// Braze's and Customer.io's frequency caps are usually set.
	DefaultPerUserCapWindow = 7 * 24 * time.Hour
)

// ErrOutcomeUnknown is the error of a message whose send may or may not have
// reached a transport that cannot de-duplicate (its worker died mid-send, or
// the connection failed after the request was written): sending it again
// could deliver it twice, so it fails instead.
var ErrOutcomeUnknown = errors.New("outcome unknown: the send may have reached the receiver and the transport cannot de-duplicate, so it is not sent again")

// ProcessorConfig configures a Processor. As in River, a zero value means
// the default and -1 (any negative value) means off, where off makes sense.
type ProcessorConfig struct {
	Transport transport.Transport // required
	Catalog   *sender.Catalog     // sender.DefaultCatalog() when nil
	// SendInterval is the least time between the starts of two sends on
	// the transport, across every process (0: the default, 500 ms; -1: no
	// pacing). Before 2026-11 0 meant no pacing; see CHANGELOG.md.
	SendInterval time.Duration
	// SendJitter, when positive, adds a random part of it to every gap
	// between two sends (pacing.go): the gaps vary from SendInterval, the
	// floor, to SendInterval + SendJitter. At most SendInterval.
	SendJitter time.Duration
	// SpreadBudget spreads the send budget's day over the waking hours
	// (the day less QuietHours): the least gap between two sends becomes
	// the waking hours over today's limit, less half the jitter (so the
	// average gap is the waking hours over the limit), never below
	// SendInterval (spread.go). It needs DailyLimit and pacing.
	SpreadBudget bool
	MaxRetries   int           // retries after the first attempt (0: the default, 3; -1: none)
	RetryBase    time.Duration // first retry's delay, doubled for each next (default 1 s)
	ClaimTimeout time.Duration // how long a claim lives unless renewed (default 2 min)
	ClaimBatch   int           // messages a worker claims at a time (default: 400, 50 or 4, see DefaultBatchedClaimBatch)
	Workers      int           // sends in flight at once (default 16)
	// Deadline, when set, is when the run stops claiming; retries due after
	// it are left for the next run.
	Deadline time.Time
	// Dedupe, when set, is an extra send guard shared with other senders: a
	// message whose idempotency key the store remembers as delivered on
	// this transport (within DedupeTTL) is marked sent without being sent
	// again. A key is remembered only once its send succeeded.
	Dedupe    idempotency.Store
	DedupeTTL time.Duration // default idempotency.DefaultTTL
	// RetryUnknown, on a transport that cannot de-duplicate, retries an
	// attempt whose outcome is unknown (no answer, or a server error after
	// the request was sent) instead of failing it: a message may then
	// arrive twice. Off by default.
	RetryUnknown bool
	// QuietHours, when set, are the hours of the day no message is sent in,
	// in the user's time zone (user_profiles.timezone when set and known),
	// else Timezone (an IANA name; default UTC). A message due inside them
	// stays pending, moved to their end.
	QuietHours QuietHours
	Timezone   string
	// DailyLimit, when positive, is the send budget: at most this many
	// distinct recipients on the transport in any rolling BudgetWindow,
	// across every process (see budget.go). A due message over it stays
	// pending, its retries unspent, moved to its place in line. Ramp, when
	// set, starts the budget lower on its first day and grows it each day
	// up to DailyLimit.
	DailyLimit int
	Ramp       Ramp
	// DailyLimitAuto makes DailyLimit follow Meta's messaging limit of the
	// business portfolio, read at start (verdict.go), and the budget count
	// only the recipients outside a customer service window
	// (portfolio.go); the transport must read its health
	// (transport.HealthReader: whatsapp-cloud).
	DailyLimitAuto bool
	// BusinessPortfolioID, with DailyLimitAuto, names the business
	// portfolio whose messaging limit the budget is: the processes of all
	// its numbers share one budget (portfolio.go). Empty: the transport's.
	BusinessPortfolioID string
	// KindPriority, when set, is the order the message types go in when
	// the send budget cannot take every due message: the listed types
	// first, in this order, then the others, oldest due first within each
	// (claim.sql). Every type must be a kind of statemachine.Kinds. Empty:
	// oldest due first, whatever the type.
	KindPriority []string
	// KindPriorityMaxWait is how long a message may have been queued before
	// it goes first whatever its type, so that no type starves under
	// KindPriority (0: DefaultKindPriorityMaxWait).
	KindPriorityMaxWait time.Duration
	// PerUserCap, when positive, is the most messages of the marketing
	// kinds one user gets in any PerUserCapWindow, across kinds and
	// processes: one over it waits (deferred, reason frequency) until the
	// window has room, or is cancelled (frequency) when it would then be
	// past its period (claim.sql).
	PerUserCap       int
	PerUserCapWindow time.Duration // 0: DefaultPerUserCapWindow
	// ReachoutWindow, on a transport held to the reach-out window
	// (transport.ReachoutLimited: the webhook), cancels a message whose
	// user last wrote to the bot longer ago than this (reachout_window,
	// reachout.go). 0: DefaultReachoutWindow; -1: off. Other transports
	// ignore it.
	ReachoutWindow time.Duration
	// ClockOffset is how far ahead of the database's clock the
	// processor's runs: what is due, the budget's window, sent_at. 0 but
	// in a simulation (queue-process --as-of).
	ClockOffset time.Duration
	Logger      zerolog.Logger
}

// Job is queue-process's name: its summary's job, and its runs' job in
// engagement_job_runs.
const Job = "queue-process"

// ProcessSummary is engagement.DeliverySummary: the root package holds the types
// the application packages share.
type ProcessSummary = engagement.DeliverySummary

// tally counts a run's deliveries across its workers.
type tally struct {
	processed, sent, retried, failed, invalid, deduplicated, claimsLost, recovered, released atomic.Int64

	mu        sync.Mutex
	cancelled map[string]int // by reason
	deferred  map[string]int // by reason
}

func (t *tally) deferral(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deferred == nil {
		t.deferred = map[string]int{}
	}
	t.deferred[reason]++
}

// reasons returns the messages cancelled and deferred, in all and by
// reason (nil maps when none).
func (t *tally) reasons() (cancelled int, byCancel map[string]int, deferred int, byDefer map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for reason, n := range t.cancelled {
		cancelled += n
		if byCancel == nil {
			byCancel = map[string]int{}
		}
		byCancel[reason] = n
	}
	for reason, n := range t.deferred {
		deferred += n
		if byDefer == nil {
			byDefer = map[string]int{}
		}
		byDefer[reason] = n
	}
	return cancelled, byCancel, deferred, byDefer
}

func (t *tally) cancel(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancelled == nil {
		t.cancelled = map[string]int{}
	}
	t.cancelled[reason]++
}

// Processor delivers due queued messages through one transport. It is
// its configuration, checked and completed once by NewProcessor, and what
// follows from it; it changes no more after that. Each Run works in a run
// of its own (run.go).
type Processor struct {
	pool   *pgxpool.Pool
	cfg    ProcessorConfig
	holder string // this processor's name on its claims: host:pid:random
	// claimQuery is the claim statement (claim.sql); a benchmark swaps in
	// a reference without the send-time checks to measure what they cost.
	claimQuery sqlfile.Statement[claimArgs, claimRow, *claimRow]
	// recheckAge is how old the last check of a message may be when its
	// send starts, unpaced (sendcheck.go): RecheckAge; a benchmark sets
	// -1 (the claim's check alone) to measure what the checks cost.
	recheckAge time.Duration
	// wishAge is how old the run's newest read of the wishes may be when
	// a send starts, unpaced (wishes.go): WishAge; a benchmark sets -1 (no
	// reads: a batch learns a wish at its next check, as before issue 56).
	wishAge time.Duration
	clock   func() time.Time // time.Now; a test's own, to age the checks
	pace    *pacer           // the configured pace; nil without pacing (each run paces with its own copy)
	floor   *floorGate       // the pace's least gap (floor.go); nil unpaced or at most floorTolerance
	log     zerolog.Logger
}

// Why a run stopped before its queue was drained, as its workers' context
// says.
var (
	errOutage    = errors.New("receiver outage")
	errLeaseLost = errors.New("the claims' lease was lost")
)

// NewProcessor returns a processor over pool, its configuration checked
// and completed with the defaults of what cfg leaves zero (complete).
func NewProcessor(pool *pgxpool.Pool, cfg ProcessorConfig) (*Processor, error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	p := &Processor{
		pool:       pool,
		cfg:        cfg,
		holder:     holderName(),
		claimQuery: claimQuery,
		recheckAge: RecheckAge,
		wishAge:    WishAge,
		clock:      time.Now,
		log:        cfg.Logger.With().Str("transport", cfg.Transport.Name()).Logger(),
	}
	if cfg.SendInterval > 0 {
		p.pace = &pacer{pool: pool, transport: cfg.Transport.Name(), interval: cfg.SendInterval, jitter: cfg.SendJitter}
		p.floor = newFloorGate(pool, cfg.Transport.Name(), cfg.SendInterval, p.log)
	}
	return p, nil
}

// complete checks cfg and fills in the defaults (the contract's) of what
// it leaves zero: once, in NewProcessor; a Processor's configuration does
// not change after.
func (cfg *ProcessorConfig) complete() error {
	if cfg.Transport == nil {
		return errors.New("no transport")
	}
	if cfg.ClaimTimeout != 0 && cfg.ClaimTimeout < MinClaimTimeout {
		return fmt.Errorf("claim timeout %s is shorter than the least, %s", cfg.ClaimTimeout, MinClaimTimeout)
	}
	if cfg.Catalog == nil {
		cfg.Catalog = sender.DefaultCatalog()
	}
	switch {
	case cfg.SendInterval == 0:
		cfg.SendInterval = DefaultSendInterval
	case cfg.SendInterval < 0:
		cfg.SendInterval = 0 // no pacing
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	cfg.RetryBase = cmp.Or(cfg.RetryBase, DefaultRetryBase)
	cfg.ClaimTimeout = cmp.Or(cfg.ClaimTimeout, DefaultClaimTimeout)
	cfg.Workers = cmp.Or(cfg.Workers, DefaultWorkers)
	cfg.Timezone = cmp.Or(cfg.Timezone, "UTC")
	if _, err := time.LoadLocation(cfg.Timezone); err != nil {
		return fmt.Errorf("time zone %q: unknown", cfg.Timezone)
	}
	if err := cfg.check(); err != nil {
		return err
	}
	cfg.PerUserCapWindow = cmp.Or(cfg.PerUserCapWindow, DefaultPerUserCapWindow)
	cfg.ReachoutWindow = cmp.Or(cfg.ReachoutWindow, DefaultReachoutWindow)
	if err := CheckKindPriority(cfg.KindPriority); err != nil {
		return err
	}
	cfg.KindPriorityMaxWait = cmp.Or(cfg.KindPriorityMaxWait, DefaultKindPriorityMaxWait)
	switch {
	case cfg.SendInterval > 0 && cfg.SpreadBudget:
		// Minutes apart: a claim holds what goes next, not a run's worth.
		cfg.ClaimBatch = cmp.Or(cfg.ClaimBatch, 1)
	case cfg.SendInterval > 0:
		cfg.ClaimBatch = cmp.Or(cfg.ClaimBatch, DefaultPacedClaimBatch)
	case cfg.Transport.Deduplicates():
		cfg.ClaimBatch = cmp.Or(cfg.ClaimBatch, DefaultBatchedClaimBatch)
	default:
		cfg.ClaimBatch = cmp.Or(cfg.ClaimBatch, DefaultClaimBatch)
	}
	return nil
}

// check checks the settings against each other, once the defaults they
// depend on (the send interval's) are in.
func (cfg *ProcessorConfig) check() error {
	switch {
	case cfg.DailyLimit < 0:
		return fmt.Errorf("daily limit %d is negative", cfg.DailyLimit)
	case cfg.DailyLimitAuto && !canReadHealth(cfg.Transport):
		return fmt.Errorf("a daily limit that follows Meta's tier needs a transport that reads it (whatsapp-cloud), not %s", cfg.Transport.Name())
	case cfg.BusinessPortfolioID != "" && !cfg.DailyLimitAuto:
		return errors.New("a business portfolio's budget is Meta's limit: it needs the daily limit auto")
	case cfg.BusinessPortfolioID != "" && ValidPortfolioID(cfg.BusinessPortfolioID) != nil:
		return ValidPortfolioID(cfg.BusinessPortfolioID)
	case cfg.Ramp.Set() && cfg.DailyLimit == 0 && !cfg.DailyLimitAuto:
		return errors.New("a ramp needs a daily limit to grow to")
	case cfg.Ramp.Set() && cfg.Ramp.Factor < 1:
		return fmt.Errorf("ramp factor %g is below 1", cfg.Ramp.Factor)
	case cfg.ClockOffset < 0:
		return fmt.Errorf("clock offset %s is negative", cfg.ClockOffset)
	case cfg.SendJitter < 0:
		return fmt.Errorf("send jitter %s is negative", cfg.SendJitter)
	case cfg.SendJitter > 0 && cfg.SendJitter > cfg.SendInterval:
		return fmt.Errorf("send jitter %s is above the send interval %s", cfg.SendJitter, cfg.SendInterval)
	case cfg.SpreadBudget && ((cfg.DailyLimit == 0 && !cfg.DailyLimitAuto) || cfg.SendInterval == 0):
		return errors.New("spreading the budget needs a daily limit and pacing")
	case cfg.KindPriorityMaxWait < 0:
		return fmt.Errorf("kind priority max wait %s is negative", cfg.KindPriorityMaxWait)
	case cfg.PerUserCap < 0:
		return fmt.Errorf("per-user cap %d is negative", cfg.PerUserCap)
	case cfg.PerUserCapWindow < 0:
		return fmt.Errorf("per-user cap window %s is negative", cfg.PerUserCapWindow)
	}
	return nil
}

// holderName names this processor on its claims, uniquely: two processors
// in one process, or a restarted process that got its old pid back, never
// share claims.
func holderName() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b[:])
}

// Run delivers due messages until none is left (retries this run scheduled
// included, when they come due before the deadline), ctx is cancelled, the
// deadline passes, or the receiver is down (see circuit). Cancelling ctx
// stops claiming and starting sends; the sends in flight finish and are
// recorded. Whatever way it stops, Run returns only after every message it
// claimed is sent, pending again, or settled from the send ledger, unless
// the database does not answer: then the summary counts what is left.
func (p *Processor) Run(ctx context.Context) (ProcessSummary, error) {
	start := time.Now()
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r := p.newRun(stop)

	err := r.deliverAll(ctx, runCtx)
	for _, h := range r.circuit.drain() {
		err = errors.Join(err, r.settleHeld(h))
	}
	left, handErr := r.handBack()
	if handErr != nil {
		r.log.Warn().Int("claims_left", left).Err(handErr).
			Msg("could not hand back every claim; recovery settles them once this run's lease runs out (--claim-timeout)")
		if err == nil {
			err = handErr
		}
	}
	sum := r.summary(ctx)
	sum.ClaimsLeft = left
	cause := context.Cause(runCtx)
	if pe := (*recovered.Error)(nil); errors.As(cause, &pe) && !errors.As(err, &pe) {
		err = errors.Join(err, pe) // a panic in the renewal stops the run: say so
	}
	switch {
	case errors.Is(cause, errOutage):
		sum.Stopped, sum.Outage = "outage", r.circuit.open()
	case errors.Is(cause, errLeaseLost):
		sum.Stopped = "lease_lost"
	case errors.Is(cause, errAccountPaused):
		sum.Stopped, sum.Pause = "account_paused", r.pauses.get()
	case ctx.Err() != nil:
		sum.Stopped = "shutdown"
	case r.pastDeadline():
		sum.Stopped = "deadline"
	}
	sum.DurationMS = time.Since(start).Milliseconds()
	return sum, err
}

// summary is the run's summary as its counts, the budget, Meta's verdict,
// the ceiling and the pace stand at its end (but why it stopped and how
// long it took, which Run adds).
func (r *run) summary(ctx context.Context) ProcessSummary {
	sum := ProcessSummary{Job: Job, Transport: r.cfg.Transport.Name()}
	t := r.tally
	sum.Processed, sum.Sent, sum.Retried = int(t.processed.Load()), int(t.sent.Load()), int(t.retried.Load())
	sum.Failed, sum.Invalid, sum.Deduplicated = int(t.failed.Load()), int(t.invalid.Load()), int(t.deduplicated.Load())
	sum.ClaimsLost, sum.Recovered, sum.Released = int(t.claimsLost.Load()), int(t.recovered.Load()), int(t.released.Load())
	if st, ok := r.cfg.Dedupe.(interface{ Stats() idempotency.Stats }); ok {
		s := st.Stats()
		sum.DedupeChecks, sum.DedupeCheckErrors, sum.DedupeCheckSeconds = int(s.Ops), int(s.Errors), s.Duration.Seconds()
	}
	sum.Cancelled, sum.CancelReasons, sum.Deferred, sum.DeferReasons = t.reasons()
	if r.budget != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		state, err := r.budgetState(ctx)
		cancel()
		if err != nil {
			r.log.Warn().Err(err).Msg("could not read the send budget for the summary")
		}
		sum.Budget = state
	}
	sum.Number = r.health
	sum.Throughput = r.throughputState()
	if r.pacer != nil {
		plan := r.plan
		sum.Pace = &plan
	}
	return sum
}

// deliverAll takes the lease, settles abandoned claims, and runs the
// workers until they are done. ctx is the caller's (a shutdown); runCtx
// also ends when the run stops for its own reasons.
func (r *run) deliverAll(ctx, runCtx context.Context) error {
	if paused, err := r.paused(runCtx); err != nil || paused {
		return stopping(runCtx, err) // paused: nothing is claimed
	}
	if err := r.readStart(runCtx); err != nil {
		return stopping(runCtx, err)
	}
	// What the run runs with, for the console and status: recorded once
	// its workers are done (recorded before them, the extra statement
	// exposed a pacing race TestPacedSendsOverlapUpToTheWorkers catches;
	// see the report of issue 46).
	defer r.recordSettings(context.WithoutCancel(ctx))
	if _, err := r.hold(runCtx, r.pool); err != nil {
		return stopping(runCtx, err)
	}
	if _, err := r.recoverAbandoned(runCtx); err != nil {
		return stopping(runCtx, err)
	}
	if err := r.startWishes(runCtx); err != nil {
		return stopping(runCtx, err)
	}
	defer r.wishes.wait()

	renewing, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	var renewer sync.WaitGroup
	renewer.Go(func() {
		if err := recovered.Call(func() { r.keepAlive(renewing, func() { r.stop(errLeaseLost) }) }); err != nil {
			r.stop(err) // the run ends with the panic, claims handed back
		}
	})
	defer func() {
		stopRenewing()
		renewer.Wait()
	}()

	return r.runWorkers(runCtx)
}

// readStart reads what the run works by: Meta's verdict, the templates'
// routes, the ceiling, the send budget, and the pace they make.
func (r *run) readStart(ctx context.Context) error {
	var err error
	if r.health, err = r.readVerdict(ctx); err != nil {
		return err
	}
	if err := r.readRoutes(ctx); err != nil {
		return err
	}
	if r.throughput, err = r.readThroughput(ctx); err != nil {
		return err
	}
	if r.cfg.DailyLimit > 0 {
		if r.budget, err = r.openBudget(ctx); err != nil {
			return err
		}
	}
	r.pace()
	r.floorPace()
	return nil
}

// runWorkers runs the workers until they are done. Workers claim and
// deliver side by side, like separate processes: SKIP LOCKED hands each
// message to one of them, and the pace (when set) spaces their sends
// across every process. They start as there is work: one at first, and one
// more each time a claim finds messages (two when it found a full batch,
// unpaced), up to Workers. A run over an empty queue (most cron runs)
// opens one connection, not a pool's worth each preparing the claim: 0.05
// s of the server's CPU instead of 0.35 s.
func (r *run) runWorkers(runCtx context.Context) error {
	g, gctx := errgroup.WithContext(runCtx)
	var started atomic.Int64
	var more func()
	more = func() {
		if started.Add(1) > int64(r.cfg.Workers) {
			return
		}
		g.Go(recovered.Func(func() error { return r.work(runCtx, gctx, more) }))
	}
	more()
	return g.Wait()
}

// work is one worker's loop: claim a batch, deliver it, until nothing is
// due; a claim that finds messages calls more, to start another worker.
// ctx is the run's (a shutdown); gctx also ends when another worker fails.
func (r *run) work(ctx, gctx context.Context, more func()) error {
	claimedNothingDue := false
	for gctx.Err() == nil && !r.pastDeadline() {
		if !r.lease.usable() {
			// A renewal is late: no claim until it lands, or until the
			// lease is gone and the run stops.
			if !sleep(gctx, r.cfg.ClaimTimeout/30) {
				return nil
			}
			continue
		}
		if paused, err := r.paused(gctx); err != nil || paused {
			return stopping(gctx, err)
		}
		claimedAt := r.clock()
		batch, moved, err := r.claim(gctx)
		if err != nil {
			return stopping(gctx, err)
		}
		if len(batch) == 0 && moved > 0 {
			// Everything it took was cancelled or moved to later (held
			// back by the budget, the quiet hours, a cap): claim on, until
			// nothing is due now. A backlog under a budget is all put in
			// line in one run, however few the workers.
			claimedNothingDue = false
			continue
		}
		if len(batch) == 0 {
			again, nothingDue, err := r.idle(gctx, claimedNothingDue)
			if err != nil || !again {
				return err
			}
			claimedNothingDue = nothingDue
			continue
		}
		claimedNothingDue = false
		if gctx.Err() != nil {
			return r.release(batch) // stopped while the claim was under way
		}
		more()
		if r.pacer == nil && len(batch) == r.cfg.ClaimBatch {
			// Unpaced, a full batch: more is waiting. Two more workers,
			// so that a backlog has every worker sending after a few
			// claims, not after Workers claims one after another (issue
			// 59). (Paced, the pace sets the rate, not the workers.)
			more()
		}
		if err := r.deliverBatch(ctx, gctx, batch, claimedAt); err != nil {
			return err
		}
	}
	return nil
}

// idle is a worker's turn when its claim found nothing due. Claims
// abandoned meanwhile are settled first, so a run that outlives a dead
// process finishes its work too, and what they hand back is claimed at
// once; under a budget with room (a ramp that grew, slots given back), the
// messages waiting on it need not wait their turn; else it waits until the
// next message is due. It reports whether to claim again, and whether it
// found something due now that the claim did not get (nothingDue: the
// second time in a row, the worker stops).
func (r *run) idle(gctx context.Context, nothingDueBefore bool) (again, nothingDue bool, err error) {
	if n, err := r.recoverAbandoned(gctx); err != nil || n > 0 {
		return err == nil, false, stopping(gctx, err)
	}
	if r.budget != nil {
		if n, err := r.advanceLine(gctx); err != nil || n > 0 {
			return err == nil, false, stopping(gctx, err)
		}
	}
	wait, ok, err := r.nextDue(gctx)
	if err != nil || !ok {
		return false, false, stopping(gctx, err)
	}
	if wait == 0 {
		// Due now, yet the claim found nothing: it came due since (a
		// retry due in milliseconds, on a slow machine), so claim again,
		// once; or another transaction holds it locked (a claim in
		// flight, the bot), and it is not this run's to wait for.
		return !nothingDueBefore, true, nil
	}
	return sleep(gctx, wait), false, nil
}

// stopping returns err, unless the run is stopping (a shutdown, or another
// worker failed): then a statement cut short by it is no failure of its
// own, and a claim it interrupted is rolled back with it.
func stopping(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// deliverBatch delivers a claimed batch one message after another, records
// the outcomes through the recording strategy, and releases the messages
// it did not start when the run stops midway.
func (r *run) deliverBatch(ctx, gctx context.Context, batch []claimed, claimedAt time.Time) error {
	rec := r.recording()
	chk := r.sendCheck(batch, claimedAt)
	for i, m := range batch {
		if gctx.Err() != nil || r.pastDeadline() {
			return errors.Join(rec.flush(ctx), r.release(unsent(batch[i:], chk)))
		}
		t, err := r.deliver(gctx, rec, chk, i)
		if t.end == endRecord {
			// Recorded even when err says settling an earlier answer
			// failed: m was sent, and handed back with the rest it would
			// give its budget slot back and be queued again.
			if recErr := rec.record(ctx, settled{m, *t.outcome}); err != nil || recErr != nil {
				return errors.Join(err, recErr, rec.flush(ctx), r.release(unsent(batch[i+1:], chk)))
			}
			continue
		}
		if err != nil {
			return errors.Join(err, rec.flush(ctx), r.release(unsent(batch[i:], chk)))
		}
	}
	return rec.flush(ctx)
}

// unsent is ms less the messages chk cancelled: the ones to hand back.
// (release.sql would leave a cancelled message alone anyway; this keeps
// it out of the count of released messages and their budget refund.)
func unsent(ms []claimed, chk *sendCheck) []claimed {
	if len(chk.cancelled) == 0 {
		return ms
	}
	out := make([]claimed, 0, len(ms))
	for _, m := range ms {
		if _, ok := chk.cancelled[m.ID]; !ok {
			out = append(out, m)
		}
	}
	return out
}

// deliver takes batch message i of chk through its turn: made ready (ready),
// its turn waited for (waitTurn), checked against its user once more
// (stillWanted), then sent (send). Each step may end the turn: with an
// outcome to record, or with nothing to record and why (turn). An error
// stops the run.
//
// Until the send starts, the run being told to stop (ctx ends: a
// shutdown, an outage another worker met, a lost lease) is no failure,
// whichever step it cuts short: m goes back to the queue unsent (see
// notStarted). Once the send has started, it finishes and is recorded.
func (r *run) deliver(ctx context.Context, rec recording, chk *sendCheck, i int) (turn, error) {
	m := chk.batch[i]
	if m.unwanted != "" {
		return r.resolveDoubt(ctx, m, m.unwanted)
	}
	log := r.messageLog(m)
	if t, err := r.ready(ctx, &m, log); err != nil || t.end != goOn {
		return t, err
	}
	if t, err := r.waitTurn(ctx, m); err != nil || t.end != goOn {
		return t, err
	}
	if t, err := r.stillWanted(ctx, chk, i, &m); err != nil || t.end != goOn {
		return t, err
	}
	return r.send(ctx, rec, chk, i, m, log)
}

// ready renders m and asks the dedupe store: a message that cannot be
// rendered fails, one the store has as delivered is marked sent, both
// recorded without a request.
func (r *run) ready(ctx context.Context, m *claimed, log zerolog.Logger) (turn, error) {
	params, err := decodeParams(m.rawParams)
	if err == nil {
		m.Params = params
		m.Text, err = r.cfg.Catalog.Render(m.Key, m.Locale, m.Params)
	}
	if err != nil {
		r.tally.processed.Add(1)
		r.tally.failed.Add(1)
		r.tally.invalid.Add(1)
		log.Error().Str("error", err.Error()).Msg("message cannot be rendered; failed")
		return toRecord(outcome{status: sm.StatusFailed, err: err, notSent: true}), nil
	}
	if r.cfg.Dedupe == nil {
		return turn{}, nil
	}
	delivered, err := r.deliveredBefore(ctx, *m)
	if err != nil {
		return r.notStarted(ctx, *m, err)
	}
	if delivered {
		r.tally.processed.Add(1)
		r.tally.deduplicated.Add(1)
		log.Warn().Msg("the dedupe store has this message's key as delivered: marked sent, not sent again")
		return toRecord(outcome{status: sm.StatusSent, err: errDeduplicated, notSent: true}), nil
	}
	return turn{}, nil
}

// waitTurn waits for m's slot of the pace and the ceiling's rate.
func (r *run) waitTurn(ctx context.Context, m claimed) (turn, error) {
	if r.pacer != nil {
		if err := r.pacer.wait(ctx, r.cfg.Deadline); err != nil {
			return r.notPaced(ctx, m, err)
		}
	}
	if r.throttle != nil {
		if err := r.throttle.wait(ctx); err != nil {
			return r.notStarted(ctx, m, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return r.notStarted(ctx, m, err) // stopping: no send starts
	}
	return turn{}, nil
}

// stillWanted checks m against its user again (chk: cancelled if no
// longer wanted), routes it by its template's category, and reads the
// account's pause, right before its request.
func (r *run) stillWanted(ctx context.Context, chk *sendCheck, i int, m *claimed) (turn, error) {
	if reason, doubted, err := chk.cancelReason(ctx, i); err != nil || reason != "" {
		switch {
		case err != nil:
			return r.notStarted(ctx, *m, err)
		case doubted:
			return r.resolveDoubt(ctx, *m, reason)
		}
		return ended(endCancelled, nil) // cancelled in the check's statement: never sent
	}
	if reason := r.routes.route(&m.Delivery); reason != "" {
		return ended(endCancelled, r.cancelUnsent(ctx, *m, reason))
	}
	if paused, err := r.pausedBeforeSend(ctx); err != nil || paused {
		if err != nil {
			return r.notStarted(ctx, *m, err)
		}
		return ended(endHandedBack, r.release([]claimed{*m})) // no request: its slot comes back
	}
	return turn{}, nil
}

// send passes the pace's floor gate (floor.go: after every check, right
// before the request), starts m's attempt, fenced on its claim, promises
// the request's write at the gate, and sends it. A paced request is
// written within WishBound of the start of the check that cleared it
// (chk.writeBy), or not at all: a check the gate's wait made older is done
// again, holding the gate; a write that still comes too late is refused,
// and m handed back.
func (r *run) send(ctx context.Context, rec recording, chk *sendCheck, i int, m claimed, log zerolog.Logger) (turn, error) {
	floor, t, err := r.passGate(ctx, chk, i, &m)
	if err != nil || t.end != goOn {
		return t, err
	}
	writeBy := chk.writeBy(i)
	ok, err := rec.begin(ctx, m)
	if !ok && floor != nil {
		floor.leave()
	}
	if err != nil {
		return r.notStarted(ctx, m, err)
	}
	if !ok {
		// Lost, or running out (renewals failing): not sent, and handed
		// back if this processor still holds it after all.
		r.tally.claimsLost.Add(1)
		log.Warn().Msg("claim lost before the send started; not sent")
		return ended(endClaimLost, r.release([]claimed{m}))
	}
	// The send in flight finishes even when a shutdown begins meanwhile, so
	// its outcome is recorded rather than guessed at.
	sendCtx := context.WithoutCancel(ctx)
	limit := &writeLimit{until: writeBy}
	switch {
	case floor != nil:
		if err := floor.promise(ctx, writeBy); err != nil {
			floor.leave()
			return r.unwritten(ctx, log, m, err)
		}
		limit = &floor.writeLimit
		sendCtx = floor.sending(sendCtx)
	case !writeBy.IsZero():
		sendCtx = limit.tracing(sendCtx)
	}
	sendStart := time.Now()
	res, sendErr := r.cfg.Transport.Send(sendCtx, m.Delivery)
	if floor != nil {
		floor.sent()
	}
	if limit.refused(sendErr) {
		why := errCheckTooOld
		if floor != nil && !limit.until.Equal(writeBy) {
			why = errFloorLost
		}
		return r.unwritten(ctx, log, m, why)
	}
	return r.attempted(log, m, res, sendErr, sendStart)
}

// passGate passes the pace's floor gate, if there is one, and checks m
// again when its check is older than WishBound by then.
func (r *run) passGate(ctx context.Context, chk *sendCheck, i int, m *claimed) (*floorPass, turn, error) {
	var floor *floorPass
	if r.floor != nil {
		var err error
		if floor, err = r.floor.enter(ctx, r.cfg.Deadline); err != nil {
			t, err := r.notPaced(ctx, *m, err)
			return nil, t, err
		}
	}
	if tooLate(chk.writeBy(i)) {
		chk.expire()
		if t, err := r.stillWanted(ctx, chk, i, m); err != nil || t.end != goOn {
			if floor != nil {
				floor.leave()
			}
			return nil, t, err
		}
	}
	return floor, turn{}, nil
}

// tooLate reports whether writeBy (not zero) has passed.
func tooLate(writeBy time.Time) bool { return !writeBy.IsZero() && !time.Now().Before(writeBy) }

// unwritten settles m, whose request was not written, for err:
// errFloorLost, the pace's floor gate was not surely the worker's any more
// (the process was stopped), or the write did not start in time;
// errCheckTooOld, the request could not start within WishBound of its
// check. Nothing was written, and m goes back to the queue unsent, due as
// it was, its retries unspent (and is checked again when claimed). Any
// other err is the promise's statement failing, as notStarted says.
func (r *run) unwritten(ctx context.Context, log zerolog.Logger, m claimed, err error) (turn, error) {
	switch {
	case errors.Is(err, errFloorLost):
		log.Warn().Msg("the request was not written in time for the pace's floor gate; not sent, handed back")
	case errors.Is(err, errCheckTooOld):
		log.Warn().Msg("the request was not written in time for its check (the wish bound); not sent, handed back to be checked again")
	default:
		return r.notStarted(ctx, m, err)
	}
	return ended(endHandedBack, r.release([]claimed{m}))
}

// notPaced settles m, whose send has not started, after the pace's slot or
// its floor gate answered err. errNoSlotInTime: the wait would end after
// the run's deadline (--max-duration): m is not sent but handed back, and
// the run stops claiming now rather than sleep to its end, an interval
// longer for each worker in line.
func (r *run) notPaced(ctx context.Context, m claimed, err error) (turn, error) {
	if errors.Is(err, errNoSlotInTime) {
		r.noSlotInTime.Store(true)
		return ended(endHandedBack, r.release([]claimed{m}))
	}
	return r.notStarted(ctx, m, err)
}

// attempted settles an attempt that reached the transport (a send, or a
// lookup of a message in doubt): through the circuit, which may hold it
// or release it for an outage, else by its outcome.
func (r *run) attempted(log zerolog.Logger, m claimed, res transport.Result, sendErr error, start time.Time) (turn, error) {
	if acct := (*transport.AccountError)(nil); errors.As(sendErr, &acct) {
		return ended(endHandedBack, r.accountRefused(log, m, acct))
	}
	answered := time.Now()
	latency := answered.Sub(start)
	v, resolved, opened := r.circuit.observe(m, sendErr, latency, answered, !r.inDoubt(sendErr))
	if opened != "" {
		r.log.Warn().Str("outage", opened).
			Msg("receiver outage: stopping; the messages claimed go back to the queue with their retries unspent")
		r.stop(errOutage)
	}
	var recErr error
	for _, h := range resolved {
		if opened != "" {
			recErr = errors.Join(recErr, r.release([]claimed{h.m}))
		} else {
			recErr = errors.Join(recErr, r.settleHeld(h))
		}
	}
	switch v {
	case hold:
		return ended(endHeld, recErr)
	case release:
		return ended(endHandedBack, errors.Join(recErr, r.release([]claimed{m})))
	}
	return toRecord(r.outcome(log, m, res, sendErr, latency, answered)), recErr
}

// notStarted settles m, whose send has not started, after a step before
// it failed with err. While the run is stopping (ctx ended), a step cut
// short by the stop (the dedupe store's lookup, the pace's reservation,
// the start's statement, a connection awaited for one of them) is no
// failure of the run's: m is handed back to the queue unsent, due as it
// was, its retries unspent, and the run goes on stopping, to exit 0 with
// its summary. That is safe whatever the step had done: nothing was
// sent. Otherwise err stops the run.
func (r *run) notStarted(ctx context.Context, m claimed, err error) (turn, error) {
	if ctx.Err() == nil {
		return turn{}, err
	}
	return ended(endHandedBack, r.release([]claimed{m}))
}

// messageLog is the logger of one message's attempt: its ids, type and
// attempt (the transport is the processor's), never its JID or text.
func (r *run) messageLog(m claimed) zerolog.Logger {
	return r.log.With().Str("message_id", m.ID).Str("user_id", m.UserID).Str("message_type", m.Type).
		Int("attempt", m.Attempt).Logger()
}

// outcome classifies an attempt that reached the transport, counts it and
// logs it: one line per attempt, info when delivered. answered is when the
// transport answered.
func (r *run) outcome(log zerolog.Logger, m claimed, res transport.Result, sendErr error, latency time.Duration, answered time.Time) outcome {
	r.tally.processed.Add(1)
	o := r.classify(m, res, sendErr)
	ms := float64(latency.Microseconds()) / 1000
	switch o.status {
	case sm.StatusSent:
		r.tally.sent.Add(1)
		r.rememberDelivered(context.Background(), m, log)
		log.Info().Float64("latency_ms", ms).Msg("message delivered")
	case sm.StatusPending:
		r.tally.retried.Add(1)
		log.Warn().Float64("latency_ms", ms).Dur("retry_in", o.retryIn).Str("class", transport.Class(sendErr)).
			Str("error", sendErr.Error()).Msg("send failed; retrying later")
	default:
		r.tally.failed.Add(1)
		log.Error().Float64("latency_ms", ms).Str("class", transport.Class(sendErr)).Str("error", o.err.Error()).Msg("message failed")
		r.optOutOn131050(log, m, sendErr, answered)
	}
	return o
}

// optOutOn131050 opts m's user out when WhatsApp refused the send with
// 131050 (the user stopped marketing messages from this business): every
// later goodbye would be refused the same way, and each refusal lowers
// the number's quality rating. The opt-out is said when WhatsApp refused
// (refused, this host's clock), so that a "resume" the user said after
// that wins, whenever it arrives, and one said before it does not undo
// it. A host clock more than 5 minutes ahead of the database's is refused
// that instant: the opt-out is then recorded as said now. A failure to
// record it is logged: the next refusal records it again. The run's other
// claimed messages of the user learn it at once (wishes.note).
func (r *run) optOutOn131050(log zerolog.Logger, m claimed, sendErr error, refused time.Time) {
	var te *transport.Error
	if !errors.As(sendErr, &te) || te.ProviderCode != 131050 || m.UserID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := activity.Consent(ctx, r.pool, m.UserID, true, activity.SourceWhatsApp131050, activity.ConsentOptions{At: refused})
	if errors.Is(err, activity.ErrInstantOutOfRange) {
		out, err = activity.Consent(ctx, r.pool, m.UserID, true, activity.SourceWhatsApp131050, activity.ConsentOptions{})
	}
	// The run's other claimed messages of the user are checked again
	// before their requests from now on, not at their batch's next check
	// (issue 56: two more went to Meta). Noted after the opt-out
	// committed, so that the check sees it.
	r.wishes.note(m.UserID)
	switch {
	case err != nil:
		log.Warn().Str("error", err.Error()).Msg("WhatsApp says the user stopped marketing messages (131050); recording the opt-out failed")
	case out == activity.ConsentChanged:
		log.Info().Msg("WhatsApp says the user stopped marketing messages (131050): opted out")
	case out == activity.ConsentSuperseded:
		log.Info().Msg("WhatsApp says the user stopped marketing messages (131050), but the user opted back in after that: left opted in")
	}
}

// settleHeld records an attempt the circuit held, now known to be the
// message's own failure.
func (r *run) settleHeld(h heldSend) error {
	o := r.outcome(r.messageLog(h.m), h.m, transport.Result{}, h.err, h.latency, h.answered)
	return r.settle([]settled{{h.m, o}}, r.cfg.Transport.Deduplicates())
}

// inDoubt reports whether a failed attempt may have reached the receiver
// on a transport that cannot de-duplicate, so that it must not be sent
// again (unless RetryUnknown).
func (r *run) inDoubt(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.MaybeDelivered && !r.cfg.Transport.Deduplicates() && !r.cfg.RetryUnknown
}

// outcome is how an attempt ended.
type outcome struct {
	status     string // sent, pending (retry) or failed
	providerID string
	retryIn    time.Duration
	err        error
	// notSent: the attempt ended before the transport (the message could
	// not be rendered, or the dedupe store stopped it): no attempt counts.
	notSent bool
	// unspent: a retry that spends none of the message's retries (Meta's
	// 130429: the number, not the message, was over its throughput).
	unspent bool
}

// classify turns a send's result into an outcome. Transient failures are
// retried with exponential backoff (or the receiver's Retry-After, if
// longer) until MaxRetries; permanent ones fail at once. On a transport
// that cannot de-duplicate, a failure after the request was written
// (timeout, reset) is in doubt: it fails with ErrOutcomeUnknown rather than
// risk a second delivery.
func (r *run) classify(m claimed, res transport.Result, err error) outcome {
	if err == nil {
		return outcome{status: sm.StatusSent, providerID: res.ProviderMessageID}
	}
	if r.inDoubt(err) {
		return outcome{status: sm.StatusFailed, err: fmt.Errorf("%w (%w)", ErrOutcomeUnknown, err)}
	}
	if pause, ok := r.rateLimited(err); ok {
		return outcome{status: sm.StatusPending, retryIn: pause, err: err, unspent: true}
	}
	var terr *transport.Error
	isTransportErr := errors.As(err, &terr)
	if (isTransportErr && terr.Permanent) || m.retryCount >= r.cfg.MaxRetries {
		return outcome{status: sm.StatusFailed, err: err}
	}
	wait := r.cfg.RetryBase << m.retryCount
	if isTransportErr && terr.RetryAfter > wait {
		wait = terr.RetryAfter
	}
	return outcome{status: sm.StatusPending, retryIn: wait, err: err}
}

// errDeduplicated is the note left on a message the dedupe store stopped.
var errDeduplicated = errors.New("not sent again: the dedupe store has its idempotency key as delivered on this transport")

// dedupeKey is the message's key in the dedupe store, per transport.
func (r *run) dedupeKey(m claimed) string {
	return "send:" + r.cfg.Transport.Name() + ":" + m.IdempotencyKey
}

// deliveredBefore asks the dedupe store whether m was delivered before.
// The store only ever holds keys of messages whose send succeeded
// (rememberDelivered), so a yes is never a guess.
func (r *run) deliveredBefore(ctx context.Context, m claimed) (bool, error) {
	_, found, err := r.cfg.Dedupe.GetResult(ctx, r.dedupeKey(m))
	if err != nil {
		return false, fmt.Errorf("dedupe store: %w", err)
	}
	return found, nil
}

// rememberDelivered records in the dedupe store that m was delivered. A
// failure only weakens the extra guard, so it is logged, not fatal.
func (r *run) rememberDelivered(ctx context.Context, m claimed, log zerolog.Logger) {
	if r.cfg.Dedupe == nil {
		return
	}
	if err := r.cfg.Dedupe.StoreResult(ctx, r.dedupeKey(m), []byte("delivered"), r.cfg.DedupeTTL); err != nil {
		log.Warn().Str("error", err.Error()).Msg("could not record the delivery in the dedupe store")
	}
}

// pastDeadline reports whether the run's deadline (--max-duration) has
// come, or no send slot comes before it.
func (r *run) pastDeadline() bool {
	return !r.cfg.Deadline.IsZero() && (!time.Now().Before(r.cfg.Deadline) || r.noSlotInTime.Load())
}

// nextDue reports how long until the next pending message comes due, if
// one does before the deadline (or, without a deadline, within a minute);
// 0 when one is due already.
func (r *run) nextDue(ctx context.Context) (time.Duration, bool, error) {
	row, err := nextDueQuery.One(ctx, r.pool, nextDueArgs{ClockOffset: r.cfg.ClockOffset})
	if err != nil {
		return 0, false, fmt.Errorf("look for retries: %w", err)
	}
	wait := row.Wait
	if wait == nil {
		return 0, false, nil
	}
	limit := time.Minute
	if !r.cfg.Deadline.IsZero() {
		limit = time.Until(r.cfg.Deadline)
	}
	if *wait > limit {
		return 0, false, nil
	}
	return max(*wait, 0), true, nil
}
