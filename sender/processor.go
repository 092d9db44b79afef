package sender

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/engagement-scheduler/engagement/idempotency"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Defaults of ProcessorConfig, as the contract has them.
const (
	DefaultSendInterval = 500 * time.Millisecond
	DefaultMaxRetries   = 3
	DefaultRetryBase    = time.Second
	DefaultClaimTimeout = 2 * time.Minute
	DefaultClaimBatch   = 10
	DefaultWorkers      = 4
	// DefaultBatchedClaim is the claim batch on a transport that
	// de-duplicates, without pacing: there a batch costs three statements
	// (claim, record, and a release if stopped) however large it is, and 50
	// measured twice the throughput of 10 (docs/BENCHMARKS.md, "Queue").
	DefaultBatchedClaim = 50
)

// ErrOutcomeUnknown is the error of a message whose worker died mid-send on
// a transport that cannot de-duplicate: it may or may not have arrived, and
// sending it again could deliver it twice.
var ErrOutcomeUnknown = errors.New("outcome unknown: the worker stopped mid-send and the transport cannot de-duplicate, so it is not sent again")

// ProcessorConfig configures a Processor.
type ProcessorConfig struct {
	Transport transport.Transport // required
	Catalog   *Catalog            // DefaultCatalog() when nil
	// SendInterval is the least time between two sends on the transport,
	// across every process (0: no pacing). Negative means the default.
	SendInterval time.Duration
	MaxRetries   int           // retries after the first attempt (0: the default, 3; negative: none)
	RetryBase    time.Duration // first retry's delay, doubled for each next (default 1 s)
	ClaimTimeout time.Duration // how long a claim lives before it counts as abandoned (default 2 min)
	ClaimBatch   int           // messages claimed at a time (default 10; 50 unpaced on a transport that de-duplicates)
	Workers      int           // messages in flight at once without pacing (default 4; 1 when paced)
	// Deadline, when set, is when the run stops claiming; retries due after
	// it are left for the next run.
	Deadline time.Time
	// Dedupe, when set, is an extra send guard: a message whose idempotency
	// key the store has seen on this transport within DedupeTTL is not sent
	// again but marked sent. A failed send forgets its key, so retries go
	// through.
	Dedupe    idempotency.Store
	DedupeTTL time.Duration // default idempotency.DefaultTTL
	Logger    zerolog.Logger
}

// ProcessSummary is what a run of the processor did.
type ProcessSummary struct {
	Job       string `json:"job"`
	Transport string `json:"transport"`
	Processed int    `json:"processed"` // delivery attempts settled: sent + retried + failed
	Sent      int    `json:"sent"`
	Retried   int    `json:"retried"` // attempts that failed and were rescheduled
	Failed    int    `json:"failed"`  // messages that ended failed
	Recovered int    `json:"recovered"`
	// Deduplicated counts messages the dedupe store stopped (marked sent).
	Deduplicated int   `json:"deduplicated,omitempty"`
	DurationMS   int64 `json:"duration_ms"`
}

// Processor delivers due queued messages through one transport.
type Processor struct {
	pool    *pgxpool.Pool
	cfg     ProcessorConfig
	limiter *rate.Limiter
	worker  string
	// batched: the transport de-duplicates and sends are not paced, so the
	// ledger's attempt is written by the claim and a claimed batch's
	// outcomes are recorded together (see work).
	batched bool
}

// NewProcessor returns a processor over pool.
func NewProcessor(pool *pgxpool.Pool, cfg ProcessorConfig) (*Processor, error) {
	if cfg.Transport == nil {
		return nil, errors.New("no transport")
	}
	if cfg.Catalog == nil {
		cfg.Catalog = DefaultCatalog()
	}
	if cfg.SendInterval < 0 {
		cfg.SendInterval = DefaultSendInterval
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	cfg.RetryBase = cmp.Or(cfg.RetryBase, DefaultRetryBase)
	cfg.ClaimTimeout = cmp.Or(cfg.ClaimTimeout, DefaultClaimTimeout)
	batched := cfg.Transport.Deduplicates() && cfg.SendInterval == 0
	if batched {
		cfg.ClaimBatch = cmp.Or(cfg.ClaimBatch, DefaultBatchedClaim)
	}
	cfg.ClaimBatch = cmp.Or(cfg.ClaimBatch, DefaultClaimBatch)
	cfg.Workers = cmp.Or(cfg.Workers, DefaultWorkers)
	if cfg.SendInterval > 0 {
		// The pace is the limit, not the workers; one keeps the sends of
		// this process in a steady line behind their reserved slots.
		cfg.Workers = 1
	}
	limiter := rate.NewLimiter(rate.Inf, 1)
	if cfg.SendInterval > 0 {
		limiter = rate.NewLimiter(rate.Every(cfg.SendInterval), 1)
	}
	hostname, _ := os.Hostname()
	return &Processor{
		pool:    pool,
		cfg:     cfg,
		limiter: limiter,
		worker:  hostname + ":" + strconv.Itoa(os.Getpid()),
		batched: batched,
	}, nil
}

// claimed is a message this process holds.
type claimed struct {
	transport.Delivery
	retryCount int
	// prior is the message's ledger row as it was before a batched claim
	// wrote this attempt's start (nil: there was none), so that releasing
	// the message unsent can put it back.
	prior *ledgerRow
}

// ledgerRow is the part of a send ledger row a claim changes.
type ledgerRow struct {
	status        string
	attempts      int
	err           *string
	lastAttemptAt time.Time
}

// attemptsBefore is how many attempts the ledger counted before this claim.
func (m claimed) attemptsBefore() int {
	if m.prior == nil {
		return 0
	}
	return m.prior.attempts
}

// Run delivers due messages until none is left (retries this run scheduled
// included, when they come due before the deadline), ctx is cancelled, or
// the deadline passes. Cancelling ctx stops claiming; the send in flight
// finishes and is recorded, and every message still held is released.
func (p *Processor) Run(ctx context.Context) (ProcessSummary, error) {
	start := time.Now()
	sum := ProcessSummary{Job: "queue-process", Transport: p.cfg.Transport.Name()}
	log := p.cfg.Logger.With().Str("transport", sum.Transport).Logger()

	if p.cfg.SendInterval > 0 {
		// The transport's pacing row, which every paced send locks.
		if _, err := p.pool.Exec(ctx, `
			INSERT INTO engagement_transport_pacing (transport, next_send_at) VALUES ($1, clock_timestamp())
			ON CONFLICT (transport) DO NOTHING`, sum.Transport); err != nil {
			return sum, fmt.Errorf("prepare pacing: %w", err)
		}
	}

	recovered, err := p.recoverAbandoned(ctx)
	if err != nil {
		return sum, err
	}
	sum.Recovered = recovered
	if recovered > 0 {
		log.Warn().Int("messages", recovered).Msg("settled messages whose worker died mid-send")
	}

	// Workers claim and deliver side by side, like separate processes: SKIP
	// LOCKED hands each message to one of them, and the shared pace (when
	// set) keeps them to one send per interval together.
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for range p.cfg.Workers {
		g.Go(func() error {
			var mine ProcessSummary
			err := p.work(ctx, gctx, &mine, log)
			mu.Lock()
			sum.add(mine)
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return sum, err
	}
	sum.DurationMS = time.Since(start).Milliseconds()
	return sum, nil
}

// work is one worker's loop: claim, deliver, until nothing is due. ctx is
// the run's (a shutdown); gctx also ends when another worker fails.
func (p *Processor) work(ctx, gctx context.Context, sum *ProcessSummary, log zerolog.Logger) error {
	for gctx.Err() == nil && !p.pastDeadline() {
		claimedAt := time.Now()
		batch, err := p.claim(gctx)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			wait, ok, err := p.nextRetry(gctx)
			if err != nil || !ok || !sleep(gctx, wait) {
				return err
			}
			continue
		}
		if p.batched {
			if err := p.deliverBatch(ctx, gctx, batch, claimedAt, sum, log); err != nil {
				return err
			}
			continue
		}
		for i, m := range batch {
			if gctx.Err() != nil || p.pastDeadline() {
				return p.release(batch[i:])
			}
			if err := p.deliver(ctx, m, sum, log, nil); err != nil {
				_ = p.release(batch[i+1:])
				return err
			}
		}
	}
	return nil
}

// deliverBatch delivers a batch claimed on the batched path, where the
// claim has already written each message's attempt to the ledger: it sends
// the messages one after another and then records every outcome, on the
// messages and in the ledger, in one statement (settleAll). When the run
// stops or fails midway, the outcomes so far are recorded and the messages
// not sent are released, their ledger rows put back as they were. So are
// they when half the claim's lifetime has passed (slow receivers): no send
// starts late in a claim that another run could soon take for abandoned.
//
// A crash between a send and the batch's record leaves the message claimed
// with its ledger row "processing": recoverAbandoned resends it under the
// same idempotency key, which the transport de-duplicates. That is why only
// transports that de-duplicate take this path.
func (p *Processor) deliverBatch(ctx, gctx context.Context, batch []claimed, claimedAt time.Time, sum *ProcessSummary, log zerolog.Logger) error {
	done := make([]settled, 0, len(batch))
	var stopErr error
	unsent := batch[:0:0]
	for i, m := range batch {
		aged := i > 0 && time.Since(claimedAt) > p.cfg.ClaimTimeout/2 // the first always goes: progress
		if gctx.Err() != nil || p.pastDeadline() || aged {
			unsent = batch[i:]
			break
		}
		if err := p.deliver(ctx, m, sum, log, &done); err != nil {
			stopErr = err // deliver released m
			unsent = batch[i+1:]
			break
		}
	}
	return errors.Join(stopErr, p.settleAll(ctx, done), p.release(unsent))
}

func (s *ProcessSummary) add(o ProcessSummary) {
	s.Processed += o.Processed
	s.Sent += o.Sent
	s.Retried += o.Retried
	s.Failed += o.Failed
	s.Deduplicated += o.Deduplicated
}

func (p *Processor) pastDeadline() bool {
	return !p.cfg.Deadline.IsZero() && !time.Now().Before(p.cfg.Deadline)
}

// claimSQL claims up to @n due pending messages, oldest first, as the CTE
// c. SKIP LOCKED lets any number of processes claim side by side, each
// message going to one.
const claimSQL = `
		c AS (
		    UPDATE engagement_message_queue q
		       SET status = 'processing', claimed_until = now() + @claim_timeout::interval, claimed_by = @worker
		     WHERE q.id IN (
		           SELECT id FROM engagement_message_queue
		            WHERE status = 'pending' AND scheduled_for <= now()
		            ORDER BY scheduled_for
		            LIMIT @n
		              FOR UPDATE SKIP LOCKED)
		    RETURNING q.id, q.user_id, q.message_type, coalesce(q.message_key, '') AS message_key, q.message_params,
		              q.destination, q.destination_jid, coalesce(q.idempotency_key, q.id::text) AS idempotency_key,
		              q.retry_count, q.scheduled_for
		)`

// claimedColumns are what a claim returns of each message of c, in the
// order scanClaimed reads them.
const claimedColumns = `
		c.id::text, c.user_id::text, c.message_type, c.message_key, c.message_params,
		coalesce((SELECT locale FROM user_profiles p WHERE p.user_id = c.user_id), @default_locale),
		c.destination, c.destination_jid, c.idempotency_key, c.retry_count`

// scanClaimed reads claimedColumns, then extra.
func scanClaimed(row pgx.CollectableRow, m *claimed, extra ...any) error {
	dest := append([]any{&m.ID, &m.UserID, &m.Type, &m.Key, &m.Params, &m.Locale,
		&m.Destination, &m.DestinationJID, &m.IdempotencyKey, &m.retryCount}, extra...)
	err := row.Scan(dest...)
	m.Attempt = m.retryCount + 1
	return err
}

// claim takes up to ClaimBatch due pending messages (claimSQL).
func (p *Processor) claim(ctx context.Context) ([]claimed, error) {
	if p.batched {
		return p.claimStarted(ctx)
	}
	rows, err := p.pool.Query(ctx, `WITH `+claimSQL+`
		SELECT `+claimedColumns+` FROM c ORDER BY c.scheduled_for`,
		pgx.NamedArgs{
			"claim_timeout":  p.cfg.ClaimTimeout,
			"worker":         p.worker,
			"n":              p.cfg.ClaimBatch,
			"default_locale": DefaultLocale,
		})
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
		var m claimed
		err := scanClaimed(row, &m)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	return batch, nil
}

// claimStarted claims like claim and, in the same statement, writes each
// message's attempt to the send ledger as started ('processing', attempts
// + 1), as ledgerStart does before each send on the other paths. It returns
// each message's ledger row as it was before (every sub-statement of the
// statement sees the same snapshot), so that release can put it back.
func (p *Processor) claimStarted(ctx context.Context) ([]claimed, error) {
	rows, err := p.pool.Query(ctx, `
		WITH `+claimSQL+`, started AS (
		    INSERT INTO engagement_processed_messages AS l (message_id, transport, status, attempts)
		    SELECT id, @transport, 'processing', 1 FROM c
		    ON CONFLICT (message_id, transport) DO UPDATE
		       SET status = 'processing', attempts = l.attempts + 1, last_attempt_at = now(), error = NULL
		)
		SELECT `+claimedColumns+`,
		       l.status, coalesce(l.attempts, 0), l.error, coalesce(l.last_attempt_at, now())
		  FROM c
		  LEFT JOIN engagement_processed_messages l ON l.message_id = c.id AND l.transport = @transport
		 ORDER BY c.scheduled_for`,
		pgx.NamedArgs{
			"claim_timeout":  p.cfg.ClaimTimeout,
			"worker":         p.worker,
			"n":              p.cfg.ClaimBatch,
			"default_locale": DefaultLocale,
			"transport":      p.cfg.Transport.Name(),
		})
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
		var m claimed
		var prior ledgerRow
		var priorStatus *string
		err := scanClaimed(row, &m, &priorStatus, &prior.attempts, &prior.err, &prior.lastAttemptAt)
		if priorStatus != nil {
			prior.status = *priorStatus
			m.prior = &prior
		}
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	return batch, nil
}

// deliver sends one claimed message and records the outcome, or, on the
// batched path (into non-nil), appends it to into for deliverBatch to
// record. Only errors that stop the run are returned; the message is then
// released unless it was settled or appended.
func (p *Processor) deliver(ctx context.Context, m claimed, sum *ProcessSummary, log zerolog.Logger, into *[]settled) error {
	settle := func(ctx context.Context, o outcome) error {
		if into != nil {
			*into = append(*into, settled{m, o})
			return nil
		}
		return p.settle(ctx, m, o)
	}
	text, err := p.cfg.Catalog.Render(m.Key, m.Locale, m.Params)
	if err != nil {
		sum.Processed++
		sum.Failed++
		log.Error().Str("message_id", m.ID).Str("error", err.Error()).Msg("message failed")
		return settle(ctx, outcome{status: "failed", err: err, notSent: true})
	}
	m.Text = text

	turn, err := p.pace(ctx)
	if err != nil {
		_ = p.release([]claimed{m})
		if ctx.Err() != nil {
			return nil // shutting down: released, not failed
		}
		return err
	}
	defer turn.done()
	if p.cfg.Dedupe != nil {
		isNew, err := p.cfg.Dedupe.Check(ctx, p.dedupeKey(m), p.cfg.DedupeTTL)
		if err != nil {
			_ = p.release([]claimed{m})
			return fmt.Errorf("dedupe store: %w", err)
		}
		if !isNew {
			sum.Processed++
			sum.Deduplicated++
			log.Warn().Str("message_id", m.ID).Msg("the dedupe store has seen this message's key: marked sent, not sent again")
			return settle(ctx, outcome{status: "sent", err: errDeduplicated, notSent: true})
		}
	}
	if !p.batched { // the batched claim wrote the attempt's start
		if err := p.ledgerStart(ctx, m); err != nil {
			return err
		}
	}

	// The send in flight finishes even when a shutdown begins meanwhile, so
	// its outcome is recorded rather than guessed at.
	sendCtx := context.WithoutCancel(ctx)
	res, sendErr := p.cfg.Transport.Send(sendCtx, m.Delivery)
	turn.done()
	sum.Processed++
	if sendErr != nil && p.cfg.Dedupe != nil {
		if f, ok := p.cfg.Dedupe.(idempotency.Forgetter); ok {
			if err := f.Forget(sendCtx, p.dedupeKey(m)); err != nil {
				log.Warn().Str("message_id", m.ID).Str("error", err.Error()).Msg("could not forget a failed send's dedupe key")
			}
		}
	}
	switch o := p.classify(m, res, sendErr); o.status {
	case "sent":
		sum.Sent++
		return settle(sendCtx, o)
	case "pending":
		sum.Retried++
		log.Warn().Str("message_id", m.ID).Int("attempt", m.Attempt).Dur("retry_in", o.retryIn).
			Str("error", sendErr.Error()).Msg("send failed; retrying later")
		return settle(sendCtx, o)
	default:
		sum.Failed++
		log.Error().Str("message_id", m.ID).Int("attempt", m.Attempt).Str("error", sendErr.Error()).Msg("message failed")
		return settle(sendCtx, o)
	}
}

// errDeduplicated is the note left on a message the dedupe store stopped.
var errDeduplicated = errors.New("not sent again: the dedupe store has seen its idempotency key on this transport")

// dedupeKey is the message's key in the dedupe store, per transport.
func (p *Processor) dedupeKey(m claimed) string {
	return "send:" + p.cfg.Transport.Name() + ":" + m.IdempotencyKey
}

// outcome is how an attempt ended.
type outcome struct {
	status     string // sent, pending (retry) or failed
	providerID string
	retryIn    time.Duration
	err        error
	// notSent: the attempt ended before the send (the message could not
	// be rendered, or the dedupe store stopped it), so it counts no attempt
	// in the ledger.
	notSent bool
}

// settled is a message's outcome waiting for deliverBatch to record it.
type settled struct {
	m claimed
	o outcome
}

// classify turns a send's result into an outcome: transient failures are
// retried with exponential backoff (or the receiver's Retry-After, if
// longer) until MaxRetries; permanent ones fail at once.
func (p *Processor) classify(m claimed, res transport.Result, err error) outcome {
	if err == nil {
		return outcome{status: "sent", providerID: res.ProviderMessageID}
	}
	var terr *transport.Error
	permanent := errors.As(err, &terr) && terr.Permanent
	if permanent || m.retryCount >= p.cfg.MaxRetries {
		return outcome{status: "failed", err: err}
	}
	wait := p.cfg.RetryBase << m.retryCount
	if terr != nil && terr.RetryAfter > wait {
		wait = terr.RetryAfter
	}
	return outcome{status: "pending", retryIn: wait, err: err}
}

// settle records an attempt's outcome on the message and in the ledger (see
// settleAll), on the paths that record each message as it goes.
func (p *Processor) settle(ctx context.Context, m claimed, o outcome) error {
	return p.settleAll(ctx, []settled{{m, o}})
}

// settleAll records attempts' outcomes on the messages and in the ledger, in
// one statement, so each message and its ledger row change together. On
// the batched path the ledger rows exist (the claim wrote them), and an
// attempt that ended before the send puts back the attempt count the claim
// added, so the ledger counts sends; on the other paths ledgerStart counted
// the attempt before the send, and the count is kept as it is.
func (p *Processor) settleAll(ctx context.Context, done []settled) error {
	if len(done) == 0 {
		return nil
	}
	n := len(done)
	var (
		ids, statuses, ledgerStatuses = make([]string, n), make([]string, n), make([]string, n)
		providerIDs, errTexts         = make([]*string, n), make([]*string, n)
		retryIns                      = make([]time.Duration, n)
		attempts                      = make([]int32, n)
	)
	for i, d := range done {
		ids[i], statuses[i], ledgerStatuses[i] = d.m.ID, d.o.status, d.o.status
		if d.o.status == "pending" {
			ledgerStatuses[i] = "failed" // this attempt failed; the next one writes its own start
		}
		providerIDs[i], retryIns[i] = nullIfEmpty(d.o.providerID), d.o.retryIn
		if d.o.err != nil {
			s := d.o.err.Error()
			errTexts[i] = &s
		}
		attempts[i] = int32(d.m.attemptsBefore())
		if p.batched && !d.o.notSent {
			attempts[i]++
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := p.record(ctx, `
		WITH o AS (
		    SELECT * FROM unnest(@ids::uuid[], @statuses::text[], @ledger_statuses::text[], @provider_ids::text[],
		                         @retry_ins::interval[], @errors::text[], @attempts::int[])
		           AS o(id, status, ledger_status, provider_id, retry_in, error, attempts)
		), message AS (
		    UPDATE engagement_message_queue q
		       SET status = o.status,
		           sent_at = CASE WHEN o.status = 'sent' THEN now() END,
		           provider_message_id = coalesce(o.provider_id, q.provider_message_id),
		           retry_count = q.retry_count + CASE WHEN o.status = 'pending' THEN 1 ELSE 0 END,
		           scheduled_for = CASE WHEN o.status = 'pending' THEN now() + o.retry_in ELSE q.scheduled_for END,
		           error_message = o.error,
		           claimed_until = NULL, claimed_by = NULL
		      FROM o
		     WHERE q.id = o.id
		)
		INSERT INTO engagement_processed_messages AS l (message_id, transport, status, attempts, provider_message_id, error)
		SELECT o.id, @transport, o.ledger_status, o.attempts, o.provider_id, o.error FROM o
		ON CONFLICT (message_id, transport) DO UPDATE
		   SET status = EXCLUDED.status,
		       attempts = CASE WHEN @batched THEN EXCLUDED.attempts ELSE l.attempts END,
		       last_attempt_at = now(),
		       provider_message_id = coalesce(EXCLUDED.provider_message_id, l.provider_message_id),
		       error = EXCLUDED.error`,
		pgx.NamedArgs{"ids": ids, "statuses": statuses, "ledger_statuses": ledgerStatuses, "provider_ids": providerIDs,
			"retry_ins": retryIns, "errors": errTexts, "attempts": attempts, "batched": p.batched,
			"transport": p.cfg.Transport.Name()})
	switch {
	case err == nil:
		return nil
	case n == 1:
		return fmt.Errorf("record delivery of %s: %w", ids[0], err)
	}
	return fmt.Errorf("record the deliveries of %d messages: %w", n, err)
}

// ledgerStart writes the attempt to the ledger before the external call.
func (p *Processor) ledgerStart(ctx context.Context, m claimed) error {
	err := p.record(ctx, `
		INSERT INTO engagement_processed_messages AS l (message_id, transport, status, attempts)
		VALUES ($1, $2, 'processing', 1)
		ON CONFLICT (message_id, transport) DO UPDATE
		   SET status = 'processing', attempts = l.attempts + 1, last_attempt_at = now(), error = NULL`,
		m.ID, p.cfg.Transport.Name())
	if err != nil {
		return fmt.Errorf("write the send ledger: %w", err)
	}
	return nil
}

// record writes a delivery record (ledger start or outcome). On a transport
// that de-duplicates, it commits without waiting for the disk: a record lost
// to a database crash leaves the message claimed with an unknown outcome,
// and such a message is resent under its same idempotency key, which the
// receiver drops. On any other transport every record is durable first.
func (p *Processor) record(ctx context.Context, sql string, args ...any) error {
	if !p.cfg.Transport.Deduplicates() {
		_, err := p.pool.Exec(ctx, sql, args...)
		return err
	}
	b := &pgx.Batch{}
	b.Queue(`SET LOCAL synchronous_commit = off`)
	b.Queue(sql, args...)
	return p.pool.SendBatch(ctx, b).Close()
}

// turn is this process's turn to send on a paced transport: while it is
// held, no other process sends on the transport. done ends it.
type turn struct {
	tx       pgx.Tx
	interval time.Duration
	ended    bool
}

// done records when the next send may start, one interval after this one
// ended, and lets the next process have its turn. It may be called again.
func (t *turn) done() {
	if t == nil || t.ended {
		return
	}
	t.ended = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = t.tx.Exec(ctx, `UPDATE engagement_transport_pacing SET next_send_at = clock_timestamp() + $1::interval`, t.interval)
	_ = t.tx.Commit(ctx)
}

// pace waits for this process's limiter, then for the transport's turn:
// the transport's row in engagement_transport_pacing is locked until the
// send has finished, and the next send may start one SendInterval after
// that. Sends on the transport thus never overlap and keep the interval
// between them, however many processes run. Without pacing it returns nil.
func (p *Processor) pace(ctx context.Context) (*turn, error) {
	if p.cfg.SendInterval == 0 {
		return nil, nil
	}
	if err := p.limiter.Wait(ctx); err != nil {
		return nil, err
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("reserve a send slot: %w", err)
	}
	var wait time.Duration
	err = tx.QueryRow(ctx, `
		SELECT greatest(next_send_at - clock_timestamp(), interval '0')
		  FROM engagement_transport_pacing WHERE transport = $1 FOR UPDATE`, p.cfg.Transport.Name()).Scan(&wait)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("reserve a send slot: %w", err)
	}
	if !sleep(ctx, wait) {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, ctx.Err()
	}
	return &turn{tx: tx, interval: p.cfg.SendInterval}, nil
}

// release hands messages this process claimed, and has not sent, back to
// the queue untouched. On the batched path it also puts back, in the same
// statement, the ledger rows the claim wrote for them: the row as it was
// before the claim, or none when there was none. Restoring rather than
// deleting keeps a retried message's earlier attempts and last error; and
// since it is one statement with the release, no message is ever pending
// with a started attempt it never made, nor claimed without its start.
// Only messages still claimed by this process are touched.
func (p *Processor) release(ms []claimed) error {
	if len(ms) == 0 {
		return nil
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p.batched {
		n := len(ms)
		statuses, errTexts := make([]*string, n), make([]*string, n)
		attempts, lastAttempts := make([]int32, n), make([]time.Time, n)
		for i, m := range ms {
			if m.prior != nil {
				statuses[i], errTexts[i] = &m.prior.status, m.prior.err
				attempts[i], lastAttempts[i] = int32(m.prior.attempts), m.prior.lastAttemptAt
			} else {
				lastAttempts[i] = time.Now() // unused: the row is deleted
			}
		}
		_, err := p.pool.Exec(ctx, `
			WITH released AS (
			    UPDATE engagement_message_queue SET status = 'pending', claimed_until = NULL, claimed_by = NULL
			     WHERE id = ANY(@ids::uuid[]) AND status = 'processing' AND claimed_by = @worker
			    RETURNING id
			), prior AS (
			    SELECT p.* FROM unnest(@ids::uuid[], @statuses::text[], @attempts::int[], @errors::text[], @last_attempts::timestamptz[])
			                    AS p(id, status, attempts, error, last_attempt_at)
			     WHERE p.id IN (SELECT id FROM released)
			), dropped AS (
			    DELETE FROM engagement_processed_messages l USING prior p
			     WHERE l.message_id = p.id AND l.transport = @transport AND p.status IS NULL
			)
			UPDATE engagement_processed_messages l
			   SET status = p.status, attempts = p.attempts, error = p.error, last_attempt_at = p.last_attempt_at
			  FROM prior p
			 WHERE l.message_id = p.id AND l.transport = @transport AND p.status IS NOT NULL`,
			pgx.NamedArgs{"ids": ids, "worker": p.worker, "transport": p.cfg.Transport.Name(), "statuses": statuses,
				"attempts": attempts, "errors": errTexts, "last_attempts": lastAttempts})
		if err != nil {
			return fmt.Errorf("release claimed messages: %w", err)
		}
		return nil
	}
	_, err := p.pool.Exec(ctx, `
		UPDATE engagement_message_queue SET status = 'pending', claimed_until = NULL, claimed_by = NULL
		 WHERE id = ANY($1::uuid[]) AND status = 'processing' AND claimed_by = $2`, ids, p.worker)
	if err != nil {
		return fmt.Errorf("release claimed messages: %w", err)
	}
	return nil
}

// recoverAbandoned settles messages whose claim expired (their worker died).
// The ledger tells what happened: a send recorded as done is marked sent; a
// send never started goes back to pending; a send whose outcome is unknown
// goes back to pending when the transport de-duplicates by idempotency key
// (the retry reuses the key), and fails with ErrOutcomeUnknown when it
// cannot. A message is never sent again under a new key.
func (p *Processor) recoverAbandoned(ctx context.Context) (int, error) {
	tag, err := p.pool.Exec(ctx, `
		WITH abandoned AS (
		    SELECT q.id, l.status AS ledger_status, l.provider_message_id
		      FROM engagement_message_queue q
		      LEFT JOIN engagement_processed_messages l ON l.message_id = q.id AND l.transport = @transport
		     WHERE q.status = 'processing' AND q.claimed_until < now()
		       FOR UPDATE OF q SKIP LOCKED
		)
		UPDATE engagement_message_queue q
		   SET status = CASE
		           WHEN a.ledger_status = 'sent' THEN 'sent'
		           WHEN a.ledger_status = 'processing' AND NOT @dedupes THEN 'failed'
		           ELSE 'pending' END,
		       sent_at = CASE WHEN a.ledger_status = 'sent' THEN coalesce(q.sent_at, now()) END,
		       provider_message_id = coalesce(a.provider_message_id, q.provider_message_id),
		       error_message = CASE WHEN a.ledger_status = 'processing' AND NOT @dedupes THEN @unknown
		                            ELSE q.error_message END,
		       claimed_until = NULL, claimed_by = NULL
		  FROM abandoned a
		 WHERE q.id = a.id`,
		pgx.NamedArgs{"transport": p.cfg.Transport.Name(), "dedupes": p.cfg.Transport.Deduplicates(),
			"unknown": ErrOutcomeUnknown.Error()})
	if err != nil {
		return 0, fmt.Errorf("settle abandoned claims: %w", err)
	}
	_, err = p.pool.Exec(ctx, `
		UPDATE engagement_processed_messages l SET status = 'failed', error = @unknown
		  FROM engagement_message_queue q
		 WHERE q.id = l.message_id AND l.transport = @transport AND l.status = 'processing'
		   AND q.status = 'failed' AND q.error_message = @unknown`,
		pgx.NamedArgs{"transport": p.cfg.Transport.Name(), "unknown": ErrOutcomeUnknown.Error()})
	if err != nil {
		return 0, fmt.Errorf("settle abandoned claims: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// nextRetry reports how long until the next pending message comes due, if
// one does before the deadline (or, without a deadline, within a minute).
func (p *Processor) nextRetry(ctx context.Context) (time.Duration, bool, error) {
	var wait *time.Duration
	err := p.pool.QueryRow(ctx, `
		SELECT min(scheduled_for) - now() FROM engagement_message_queue WHERE status = 'pending'`).Scan(&wait)
	if err != nil {
		return 0, false, fmt.Errorf("look for retries: %w", err)
	}
	if wait == nil {
		return 0, false, nil
	}
	limit := time.Minute
	if !p.cfg.Deadline.IsZero() {
		limit = time.Until(p.cfg.Deadline)
	}
	if *wait > limit {
		return 0, false, nil
	}
	return max(*wait, 0), true, nil
}

// sleep waits d or until ctx is done, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
