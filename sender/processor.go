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
	ClaimBatch   int           // messages claimed at a time (default 10)
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
	}, nil
}

// claimed is a message this process holds.
type claimed struct {
	transport.Delivery
	retryCount int
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
		for i, m := range batch {
			if gctx.Err() != nil || p.pastDeadline() {
				return p.release(batch[i:])
			}
			if err := p.deliver(ctx, m, sum, log); err != nil {
				_ = p.release(batch[i+1:])
				return err
			}
		}
	}
	return nil
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

// claim takes up to ClaimBatch due pending messages. SKIP LOCKED lets any
// number of processes claim side by side, each message going to one.
func (p *Processor) claim(ctx context.Context) ([]claimed, error) {
	rows, err := p.pool.Query(ctx, `
		UPDATE engagement_message_queue q
		   SET status = 'processing', claimed_until = now() + @claim_timeout::interval, claimed_by = @worker
		 WHERE q.id IN (
		       SELECT id FROM engagement_message_queue
		        WHERE status = 'pending' AND scheduled_for <= now()
		        ORDER BY scheduled_for
		        LIMIT @n
		          FOR UPDATE SKIP LOCKED)
		RETURNING q.id::text, q.user_id::text, q.message_type, coalesce(q.message_key, ''), q.message_params,
		          coalesce((SELECT locale FROM user_profiles p WHERE p.user_id = q.user_id), @default_locale),
		          q.destination, q.destination_jid, coalesce(q.idempotency_key, q.id::text), q.retry_count`,
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
		err := row.Scan(&m.ID, &m.UserID, &m.Type, &m.Key, &m.Params, &m.Locale,
			&m.Destination, &m.DestinationJID, &m.IdempotencyKey, &m.retryCount)
		m.Attempt = m.retryCount + 1
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	return batch, nil
}

// deliver sends one claimed message and records the outcome. Only errors
// that stop the run are returned.
func (p *Processor) deliver(ctx context.Context, m claimed, sum *ProcessSummary, log zerolog.Logger) error {
	text, err := p.cfg.Catalog.Render(m.Key, m.Locale, m.Params)
	if err != nil {
		sum.Processed++
		sum.Failed++
		log.Error().Str("message_id", m.ID).Str("error", err.Error()).Msg("message failed")
		return p.settle(ctx, m, outcome{status: "failed", err: err})
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
			return p.settle(ctx, m, outcome{status: "sent", err: errDeduplicated})
		}
	}
	if err := p.ledgerStart(ctx, m); err != nil {
		return err
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
		return p.settle(sendCtx, m, o)
	case "pending":
		sum.Retried++
		log.Warn().Str("message_id", m.ID).Int("attempt", m.Attempt).Dur("retry_in", o.retryIn).
			Str("error", sendErr.Error()).Msg("send failed; retrying later")
		return p.settle(sendCtx, m, o)
	default:
		sum.Failed++
		log.Error().Str("message_id", m.ID).Int("attempt", m.Attempt).Str("error", sendErr.Error()).Msg("message failed")
		return p.settle(sendCtx, m, o)
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

// settle records an attempt's outcome on the message and in the ledger, in
// one transaction.
func (p *Processor) settle(ctx context.Context, m claimed, o outcome) error {
	var errText *string
	if o.err != nil {
		s := o.err.Error()
		errText = &s
	}
	ledgerStatus := o.status
	if ledgerStatus == "pending" {
		ledgerStatus = "failed" // this attempt failed; the next one writes its own start
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// One statement, so the message and its ledger row change together.
	err := p.record(ctx, `
		WITH message AS (
		    UPDATE engagement_message_queue
		       SET status = @status,
		           sent_at = CASE WHEN @status = 'sent' THEN now() END,
		           provider_message_id = coalesce(@provider_id, provider_message_id),
		           retry_count = retry_count + CASE WHEN @status = 'pending' THEN 1 ELSE 0 END,
		           scheduled_for = CASE WHEN @status = 'pending' THEN now() + @retry_in::interval ELSE scheduled_for END,
		           error_message = @error,
		           claimed_until = NULL, claimed_by = NULL
		     WHERE id = @id
		)
		INSERT INTO engagement_processed_messages AS l (message_id, transport, status, attempts, provider_message_id, error)
		VALUES (@id, @transport, @ledger_status, 0, @provider_id, @error)
		ON CONFLICT (message_id, transport) DO UPDATE
		   SET status = EXCLUDED.status, last_attempt_at = now(),
		       provider_message_id = coalesce(EXCLUDED.provider_message_id, l.provider_message_id),
		       error = EXCLUDED.error`,
		pgx.NamedArgs{"id": m.ID, "status": o.status, "ledger_status": ledgerStatus, "transport": p.cfg.Transport.Name(),
			"provider_id": nullIfEmpty(o.providerID), "retry_in": o.retryIn, "error": errText})
	if err != nil {
		return fmt.Errorf("record delivery of %s: %w", m.ID, err)
	}
	return nil
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

// release hands messages this process claimed back to the queue untouched.
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
