// Package retention ages the queue out (engagementctl cleanup): it deletes
// sent, failed and cancelled messages older than the retention, in batches,
// but never before the last instant a job could produce their idempotency
// key again (replay_until), so a late re-run cannot send one twice.
package retention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/idempotency"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
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
	// FireRequests counts the bot's request keys (engagement_fire) older
	// than the retention.
	FireRequests int64 `json:"fire_requests"`
}

var (
	cleanupCountSQL     = mustQuery("cleanup_count")
	cleanupDeleteSQL    = mustQuery("cleanup_delete")
	cleanupCountKeysSQL = mustQuery("cleanup_count_keys")

	cleanupCountFireRequestsSQL  = mustQuery("cleanup_count_fire_requests")
	cleanupDeleteFireRequestsSQL = mustQuery("cleanup_delete_fire_requests")
)

// Cleanup deletes, in batches, sent, failed and cancelled messages queued
// before AsOf − OlderThan, with their ledger rows, keeping any message
// whose idempotency key a job could still produce within that window, and
// the PostgreSQL dedupe store's keys expired by AsOf, and the bot's
// request keys (engagement_fire) older than the retention. Pending and
// in-flight messages are never touched.
func Cleanup(ctx context.Context, pool *pgxpool.Pool, cfg CleanupConfig) (CleanupSummary, error) {
	if cfg.OlderThan <= 0 || cfg.AsOf.IsZero() {
		return CleanupSummary{}, errors.New("cleanup needs a positive retention and an as-of instant")
	}
	sum := CleanupSummary{Cutoff: cfg.AsOf.Add(-cfg.OlderThan).UTC(), DryRun: cfg.DryRun}
	batch := cmp.Or(cfg.BatchSize, 5000)
	args := sqlfile.Args{"cutoff": sum.Cutoff, "n": batch}
	if cfg.DryRun {
		counted := sqlfile.Args{"cutoff": sum.Cutoff}
		err := pool.QueryRow(ctx, cleanupCountSQL, counted).Scan(&sum.Messages, &sum.Ledger)
		if err != nil {
			return sum, fmt.Errorf("count old messages: %w", err)
		}
		err = pool.QueryRow(ctx, cleanupCountKeysSQL, sqlfile.Args{"as_of": cfg.AsOf}).Scan(&sum.IdempotencyKeys)
		if err != nil {
			return sum, fmt.Errorf("count expired idempotency keys: %w", err)
		}
		err = pool.QueryRow(ctx, cleanupCountFireRequestsSQL, counted).Scan(&sum.FireRequests)
		if err != nil {
			return sum, fmt.Errorf("count old request keys: %w", err)
		}
		return sum, nil
	}
	for {
		tag, err := pool.Exec(ctx, cleanupDeleteFireRequestsSQL, args)
		if err != nil {
			return sum, fmt.Errorf("delete old request keys: %w", err)
		}
		sum.FireRequests += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			break
		}
	}
	keys, err := idempotency.NewPostgres(pool, idempotency.Options{}).DeleteExpired(ctx, cfg.AsOf, batch)
	if err != nil {
		return sum, fmt.Errorf("delete expired idempotency keys: %w", err)
	}
	sum.IdempotencyKeys = keys
	for {
		var messages, ledger int64
		err := pool.QueryRow(ctx, cleanupDeleteSQL, args).Scan(&messages, &ledger)
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
