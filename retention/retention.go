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

// Day is 24 hours, the unit the horizons below are stated in.
const Day = 24 * time.Hour

// DefaultTransitionRetention is how long the state transition log is kept
// by default (cleanup --transitions-older-than): a little over a year,
// for year-on-year questions, well past what the funnel reads.
const DefaultTransitionRetention = 400 * Day

// MinTransitionRetention is the shortest horizon the transition log may be
// given: the console's funnel reads 12 weekly cohorts and the 30 days
// after each (84 + 30 days), and a few days more for a late look.
const MinTransitionRetention = 120 * Day

// DefaultConsentRetention is how long consent events are kept by default
// (cleanup --consent-older-than): five years, the period within which the
// controller may have to show how a person's marketing consent stood
// (LGPD art. 8 § 2 puts the burden of proving consent on the controller;
// five years is the general limitation period of a consumer claim in
// Brazil, CDC art. 27). A user's latest event is kept whatever its age.
const DefaultConsentRetention = 5 * 365 * Day

// CleanupConfig configures Cleanup.
type CleanupConfig struct {
	OlderThan time.Duration // required: keep everything younger
	AsOf      time.Time     // "now"; required
	DryRun    bool          // count, delete nothing
	BatchSize int           // rows deleted per statement (default 5,000)
	// TransitionsOlderThan is the transition log's horizon: rows logged
	// before AsOf minus it go, but for each user's latest. 0 keeps the
	// log whole.
	TransitionsOlderThan time.Duration
	// ConsentOlderThan is the consent events' horizon: events recorded
	// before AsOf minus it go, but for each user's latest. 0 keeps them all.
	ConsentOlderThan time.Duration
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
	// Transitions counts rows of the state transition log logged before
	// TransitionsCutoff (absent: the log is kept whole), never a user's latest.
	TransitionsCutoff *time.Time `json:"transitions_cutoff,omitempty"`
	Transitions       int64      `json:"transitions"`
	// ConsentEvents counts consent events recorded before ConsentCutoff
	// (absent: all are kept), never a user's latest.
	ConsentCutoff *time.Time `json:"consent_cutoff,omitempty"`
	ConsentEvents int64      `json:"consent_events"`
}

var (
	cleanupCountSQL     = mustQuery("cleanup_count")
	cleanupDeleteSQL    = mustQuery("cleanup_delete")
	cleanupCountKeysSQL = mustQuery("cleanup_count_keys")

	cleanupCountFireRequestsSQL  = mustQuery("cleanup_count_fire_requests")
	cleanupDeleteFireRequestsSQL = mustQuery("cleanup_delete_fire_requests")

	cleanupCountTransitionsSQL  = mustQuery("cleanup_count_transitions")
	cleanupDeleteTransitionsSQL = mustQuery("cleanup_delete_transitions")
	cleanupCountConsentSQL      = mustQuery("cleanup_count_consent")
	cleanupDeleteConsentSQL     = mustQuery("cleanup_delete_consent")
)

// horizon is one of the logs Cleanup ages out by a horizon of its own.
type horizon struct {
	what          string
	keep          time.Duration
	count, delete string
	cutoff        **time.Time
	n             *int64
}

// ageOut counts (dry run) or deletes, in batches, the rows of h older than
// its horizon; nothing when the horizon is 0.
func ageOut(ctx context.Context, pool *pgxpool.Pool, cfg CleanupConfig, batch int, h horizon) error {
	if h.keep <= 0 {
		return nil
	}
	cutoff := cfg.AsOf.Add(-h.keep).UTC()
	*h.cutoff = &cutoff
	if cfg.DryRun {
		if err := pool.QueryRow(ctx, h.count, sqlfile.Args{"cutoff": cutoff}).Scan(h.n); err != nil {
			return fmt.Errorf("count old %s: %w", h.what, err)
		}
		return nil
	}
	for {
		tag, err := pool.Exec(ctx, h.delete, sqlfile.Args{"cutoff": cutoff, "n": batch})
		if err != nil {
			return fmt.Errorf("delete old %s: %w", h.what, err)
		}
		*h.n += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return nil
		}
	}
}

// Cleanup deletes, in batches, sent, failed and cancelled messages queued
// before AsOf − OlderThan, with their ledger rows, keeping any message
// whose idempotency key a job could still produce within that window, and
// the PostgreSQL dedupe store's keys expired by AsOf, and the bot's
// request keys (engagement_fire) older than the retention; and, by their
// own horizons, the state transition log's rows and the consent events,
// each user's latest row of either kept. Pending and in-flight messages
// are never touched.
func Cleanup(ctx context.Context, pool *pgxpool.Pool, cfg CleanupConfig) (CleanupSummary, error) {
	if cfg.OlderThan <= 0 || cfg.AsOf.IsZero() {
		return CleanupSummary{}, errors.New("cleanup needs a positive retention and an as-of instant")
	}
	if cfg.TransitionsOlderThan < 0 || cfg.ConsentOlderThan < 0 {
		return CleanupSummary{}, errors.New("cleanup's horizons must not be negative (0: keep)")
	}
	sum := CleanupSummary{Cutoff: cfg.AsOf.Add(-cfg.OlderThan).UTC(), DryRun: cfg.DryRun}
	batch := cmp.Or(cfg.BatchSize, 5000)
	for _, h := range []horizon{
		{"state transitions", cfg.TransitionsOlderThan, cleanupCountTransitionsSQL, cleanupDeleteTransitionsSQL, &sum.TransitionsCutoff, &sum.Transitions},
		{"consent events", cfg.ConsentOlderThan, cleanupCountConsentSQL, cleanupDeleteConsentSQL, &sum.ConsentCutoff, &sum.ConsentEvents},
	} {
		if err := ageOut(ctx, pool, cfg, batch, h); err != nil {
			return sum, err
		}
	}
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
