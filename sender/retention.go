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

// replayHorizonSQL is the last instant a message's idempotency key could be
// produced again by a job run: the end of the goodbye's day, the end of the
// review's ISO week, the reminder's instant. Keys of other shapes, keys
// whose date or week does not exist (ops-fix:goodbye_sent:2026-02-30, a
// week 54), and messages without a key, count from when they were queued.
//
// Nothing here may fail on a key: a cast error would stop every cleanup
// run. The day is built by interval arithmetic, which cannot fail on two-
// and four-digit numbers, and kept only when it prints back as the key's
// text (2026-02-30 comes out as 2026-03-02); the week likewise round-trips
// through to_date and to_char. The nested CASE makes sure the arithmetic
// runs only on keys the pattern matched.
const replayHorizonSQL = `
	CASE
	    WHEN q.idempotency_key ~ ':goodbye_sent:\d{4}-\d{2}-\d{2}$' THEN
	        CASE WHEN to_char(` + goodbyeDaySQL + `, 'YYYY-MM-DD') = right(q.idempotency_key, 10)
	             THEN (` + goodbyeDaySQL + ` + interval '1 day') AT TIME ZONE 'UTC'
	             ELSE q.created_at END
	    WHEN q.idempotency_key ~ ':weekly_review:\d{4}-W\d{2}$' THEN
	        CASE WHEN to_char(` + reviewWeekSQL + `, 'IYYY-"W"IW') = right(q.idempotency_key, 8)
	             THEN (` + reviewWeekSQL + ` + 7)::timestamp AT TIME ZONE 'UTC'
	             ELSE q.created_at END
	    WHEN q.idempotency_key ~ ':reminder:\d{1,15}$'
	        THEN to_timestamp(substring(q.idempotency_key FROM ':reminder:(\d+)$')::bigint / 1000.0)
	    ELSE q.created_at
	END`

// goodbyeDaySQL is the goodbye key's YYYY-MM-DD as a timestamp, computed
// without a date cast: 2000-01-01 plus the years, months and days, so an
// impossible date rolls over instead of raising an error.
const goodbyeDaySQL = `(timestamp '2000-01-01' + make_interval(
	    years  => substr(right(q.idempotency_key, 10), 1, 4)::int - 2000,
	    months => substr(right(q.idempotency_key, 10), 6, 2)::int - 1,
	    days   => substr(right(q.idempotency_key, 10), 9, 2)::int - 1))`

// reviewWeekSQL is the Monday of the review key's ISO week (to_date rolls
// a week past the year's last over rather than failing).
const reviewWeekSQL = `to_date(replace(right(q.idempotency_key, 8), '-W', '-'), 'IYYY-IW')`

// deletableSQL selects settled messages past the retention whose keys can no
// longer be produced again: a job re-run with any --as-of inside the
// retention window finds its key still there and queues nothing.
const deletableSQL = `
	SELECT q.id FROM engagement_message_queue q
	 WHERE q.status IN ('sent', 'failed', 'cancelled')
	   AND q.created_at < @cutoff
	   AND ` + replayHorizonSQL + ` < @cutoff`

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
