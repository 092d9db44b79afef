package sender

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/idempotency"
)

// DefaultRetention is how long settled messages are kept by default.
const DefaultRetention = 720 * time.Hour

// CleanupConfig configures Cleanup.
type CleanupConfig struct {
	OlderThan time.Duration // required: keep everything younger
	AsOf      time.Time     // "now"; required
	DryRun    bool          // count, delete nothing
	BatchSize int           // rows deleted per statement (default 5,000)
}

// CleanupSummary counts what Cleanup deleted (or, in a dry run, would).
type CleanupSummary struct {
	Cutoff   time.Time `json:"cutoff"`
	DryRun   bool      `json:"dry_run"`
	Messages int64     `json:"messages"`
	Ledger   int64     `json:"ledger"`
	// IdempotencyKeys counts expired keys of the PostgreSQL dedupe store.
	IdempotencyKeys int64 `json:"idempotency_keys"`
}

// deletableSQL selects settled messages past the retention whose keys can no
// longer be produced again: a job re-run with any --as-of inside the
// retention window finds its key still there and queues nothing. Until when
// a key could be produced again is the message's replay_until, set when it
// was queued (the end of the goodbye's day, of the review's ISO week); a
// message without one (no key, or queued by the bot) counts from when it
// was queued. No key's text is read.
const deletableSQL = `
	SELECT q.id FROM engagement_message_queue q
	 WHERE q.status IN ('sent', 'failed', 'cancelled')
	   AND q.created_at < @cutoff
	   AND (q.replay_until IS NULL OR q.replay_until < @cutoff)`

// Cleanup deletes, in batches, sent, failed and cancelled messages queued
// before AsOf − OlderThan, with their ledger rows, keeping any message
// whose idempotency key a job could still produce within that window, and
// the PostgreSQL dedupe store's keys expired by AsOf. Pending and in-flight
// messages are never touched.
func Cleanup(ctx context.Context, pool *pgxpool.Pool, cfg CleanupConfig) (CleanupSummary, error) {
	if cfg.OlderThan <= 0 || cfg.AsOf.IsZero() {
		return CleanupSummary{}, errors.New("cleanup needs a positive retention and an as-of instant")
	}
	sum := CleanupSummary{Cutoff: cfg.AsOf.Add(-cfg.OlderThan).UTC(), DryRun: cfg.DryRun}
	batch := cmp.Or(cfg.BatchSize, 5000)
	args := pgx.NamedArgs{"cutoff": sum.Cutoff, "n": batch}
	if cfg.DryRun {
		err := pool.QueryRow(ctx, `
			WITH doomed AS (`+deletableSQL+`)
			SELECT (SELECT count(*) FROM doomed),
			       (SELECT count(*) FROM engagement_processed_messages l WHERE l.message_id IN (SELECT id FROM doomed))`,
			args).Scan(&sum.Messages, &sum.Ledger)
		if err != nil {
			return sum, fmt.Errorf("count old messages: %w", err)
		}
		err = pool.QueryRow(ctx, `SELECT count(*) FROM engagement_idempotency_keys WHERE expires_at <= $1`, cfg.AsOf).Scan(&sum.IdempotencyKeys)
		if err != nil {
			return sum, fmt.Errorf("count expired idempotency keys: %w", err)
		}
		return sum, nil
	}
	keys, err := idempotency.NewPostgres(pool, idempotency.Options{}).DeleteExpired(ctx, cfg.AsOf, batch)
	if err != nil {
		return sum, fmt.Errorf("delete expired idempotency keys: %w", err)
	}
	sum.IdempotencyKeys = keys
	for {
		var messages, ledger int64
		err := pool.QueryRow(ctx, `
			WITH doomed AS (`+deletableSQL+` LIMIT @n FOR UPDATE SKIP LOCKED),
			ledger AS (
			    DELETE FROM engagement_processed_messages l USING doomed WHERE l.message_id = doomed.id RETURNING 1
			),
			gone AS (
			    DELETE FROM engagement_message_queue q USING doomed WHERE q.id = doomed.id RETURNING 1
			)
			SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM ledger)`, args).Scan(&messages, &ledger)
		if err != nil {
			return sum, fmt.Errorf("delete old messages: %w", err)
		}
		sum.Messages += messages
		sum.Ledger += ledger
		if messages < int64(batch) {
			return sum, nil
		}
	}
}
