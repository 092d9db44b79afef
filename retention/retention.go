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

	"github.com/engagement-scheduler/engagement"
	"github.com/engagement-scheduler/engagement/idempotency"
	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// DefaultRetention is how long settled messages are kept by default.
const DefaultRetention = engagement.DefaultRetention

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

// DefaultAuditRetention is how long the console's audit log is kept by
// default (cleanup --audit-older-than): five years, as long as consent
// events, since the audit records the operators' opt-outs, opt-ins and
// erasures, the proof that a person's request was carried out.
const DefaultAuditRetention = 5 * 365 * Day

// MinAuditRetention is the shortest horizon the audit log may be given:
// an audit trail that forgets within a year cannot answer for one.
const MinAuditRetention = 365 * Day

// DefaultRunRetention is how long job runs are kept by default (cleanup
// --runs-older-than): 90 days of run history, queue-process's every-minute
// runs included. The runs something still needs are kept whatever their
// age (KeepRuns, and see queries/cleanup_delete_runs.sql).
const DefaultRunRetention = 90 * Day

// MinRunRetention is the shortest horizon the job runs may be given: a
// week, so last week's failures can still be looked at.
const MinRunRetention = 7 * Day

// KeepRuns is how many of each job's and shard's latest runs cleanup keeps
// whatever their age: what the console's runs page lists
// (console.RunsPerJob).
const KeepRuns = 100

// KeptReceiptRetention is how long a receipt that came before its send
// is kept for the send to find (../shared/CONTRACT.md, round seven): a
// send is recorded within a second of its answer, so what is older belongs
// to no send of the scheduler's (the bot's own conversation).
const KeptReceiptRetention = 7 * Day

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
	// AuditOlderThan is the console audit log's horizon: rows written
	// before AsOf minus it go. 0 keeps the log whole.
	AuditOlderThan time.Duration
	// RunsOlderThan is the job runs' horizon: runs started before AsOf
	// minus it go, but for runs still going, runs a queue or log row
	// names, and each job's and shard's latest KeepRuns. 0 keeps them all.
	RunsOlderThan time.Duration
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
	// KeptReceipts counts receipts kept for a send that never came
	// (engagement_receipt_inbox), older than KeptReceiptRetention.
	KeptReceipts int64 `json:"kept_receipts"`
	// AuditRows counts rows of the console's audit log written before
	// AuditCutoff (absent: the log is kept whole).
	AuditCutoff *time.Time `json:"audit_cutoff,omitempty"`
	AuditRows   int64      `json:"audit_rows"`
	// JobRuns counts job runs started before RunsCutoff (absent: all are
	// kept), never one still going, named, or among its job's latest.
	RunsCutoff *time.Time `json:"runs_cutoff,omitempty"`
	JobRuns    int64      `json:"job_runs"`
}

// agedLog is one of the logs Cleanup ages out by a horizon of its own:
// count counts its rows older than cutoff (never a user's latest), delete
// deletes up to n of them and says how many.
type agedLog struct {
	what   string
	count  func(ctx context.Context, db postgres.Querier, cutoff time.Time) (int64, error)
	delete func(ctx context.Context, db postgres.Querier, cutoff time.Time, n int64) (int64, error)
}

// The logs with horizons of their own: the state transition log, the
// consent events and the kept receipts.
var (
	transitionsLog = agedLog{
		what: "state transitions",
		count: func(ctx context.Context, db postgres.Querier, cutoff time.Time) (int64, error) {
			r, err := cleanupCountTransitionsQuery.One(ctx, db, cleanupCountTransitionsArgs{Cutoff: cutoff})
			return r.Transitions, err
		},
		delete: func(ctx context.Context, db postgres.Querier, cutoff time.Time, n int64) (int64, error) {
			tag, err := cleanupDeleteTransitionsQuery.Exec(ctx, db, cleanupDeleteTransitionsArgs{Cutoff: cutoff, N: n})
			return tag.RowsAffected(), err
		},
	}
	consentLog = agedLog{
		what: "consent events",
		count: func(ctx context.Context, db postgres.Querier, cutoff time.Time) (int64, error) {
			r, err := cleanupCountConsentQuery.One(ctx, db, cleanupCountConsentArgs{Cutoff: cutoff})
			return r.ConsentEvents, err
		},
		delete: func(ctx context.Context, db postgres.Querier, cutoff time.Time, n int64) (int64, error) {
			tag, err := cleanupDeleteConsentQuery.Exec(ctx, db, cleanupDeleteConsentArgs{Cutoff: cutoff, N: n})
			return tag.RowsAffected(), err
		},
	}
	keptReceipts = agedLog{
		what: "kept receipts",
		count: func(ctx context.Context, db postgres.Querier, cutoff time.Time) (int64, error) {
			r, err := cleanupCountReceiptsQuery.One(ctx, db, cleanupCountReceiptsArgs{Cutoff: cutoff})
			return r.KeptReceipts, err
		},
		delete: func(ctx context.Context, db postgres.Querier, cutoff time.Time, n int64) (int64, error) {
			tag, err := cleanupDeleteReceiptsQuery.Exec(ctx, db, cleanupDeleteReceiptsArgs{Cutoff: cutoff, N: n})
			return tag.RowsAffected(), err
		},
	}
)

// The console's audit log and the job runs, aged out after the messages
// (a run the deleted messages named is free to go).
var (
	auditLog = agedLog{
		what: "audit rows",
		count: func(ctx context.Context, db postgres.Querier, cutoff time.Time) (int64, error) {
			r, err := cleanupCountAuditQuery.One(ctx, db, cleanupCountAuditArgs{Cutoff: cutoff})
			return r.AuditRows, err
		},
		delete: func(ctx context.Context, db postgres.Querier, cutoff time.Time, n int64) (int64, error) {
			tag, err := cleanupDeleteAuditQuery.Exec(ctx, db, cleanupDeleteAuditArgs{Cutoff: cutoff, N: n})
			return tag.RowsAffected(), err
		},
	}
	runsLog = agedLog{
		what: "job runs",
		count: func(ctx context.Context, db postgres.Querier, cutoff time.Time) (int64, error) {
			r, err := cleanupCountRunsQuery.One(ctx, db, cleanupCountRunsArgs{Cutoff: cutoff, Keep: KeepRuns})
			return r.JobRuns, err
		},
		delete: func(ctx context.Context, db postgres.Querier, cutoff time.Time, n int64) (int64, error) {
			tag, err := cleanupDeleteRunsQuery.Exec(ctx, db, cleanupDeleteRunsArgs{Cutoff: cutoff, Keep: KeepRuns, N: n})
			return tag.RowsAffected(), err
		},
	}
)

// ageOut counts (dry run) or deletes, in batches, the rows of l logged
// before AsOf − keep, and returns that cutoff and how many; nothing (a nil
// cutoff) when keep is 0.
func ageOut(ctx context.Context, pool *pgxpool.Pool, cfg CleanupConfig, batch int64, l agedLog, keep time.Duration) (*time.Time, int64, error) {
	if keep <= 0 {
		return nil, 0, nil
	}
	cutoff := cfg.AsOf.Add(-keep).UTC()
	if cfg.DryRun {
		n, err := l.count(ctx, pool, cutoff)
		if err != nil {
			return &cutoff, 0, fmt.Errorf("count old %s: %w", l.what, err)
		}
		return &cutoff, n, nil
	}
	var total int64
	for {
		n, err := l.delete(ctx, pool, cutoff, batch)
		if err != nil {
			return &cutoff, total, fmt.Errorf("delete old %s: %w", l.what, err)
		}
		total += n
		if n < batch {
			return &cutoff, total, nil
		}
	}
}

// Cleanup deletes, in batches, sent, failed and cancelled messages queued
// before AsOf − OlderThan, with their ledger rows, keeping any message
// whose idempotency key a job could still produce within that window, and
// the PostgreSQL dedupe store's keys expired by AsOf, and the bot's
// request keys (engagement_fire) older than the retention; and, by their
// own horizons, the state transition log's rows and the consent events,
// each user's latest row of either kept, and the receipts kept for a send
// that never came (KeptReceiptRetention); then, by their own horizons, the
// console's audit log and the job runs (never a run still going, one a
// queue or log row names, or one of its job's latest KeepRuns). Pending and
// in-flight messages are never touched.
func Cleanup(ctx context.Context, pool *pgxpool.Pool, cfg CleanupConfig) (CleanupSummary, error) {
	if cfg.OlderThan <= 0 || cfg.AsOf.IsZero() {
		return CleanupSummary{}, errors.New("cleanup needs a positive retention and an as-of instant")
	}
	if cfg.TransitionsOlderThan < 0 || cfg.ConsentOlderThan < 0 || cfg.AuditOlderThan < 0 || cfg.RunsOlderThan < 0 {
		return CleanupSummary{}, errors.New("cleanup's horizons must not be negative (0: keep)")
	}
	sum := CleanupSummary{Cutoff: cfg.AsOf.Add(-cfg.OlderThan).UTC(), DryRun: cfg.DryRun}
	batch := int64(cmp.Or(cfg.BatchSize, 5000))
	var err error
	sum.TransitionsCutoff, sum.Transitions, err = ageOut(ctx, pool, cfg, batch, transitionsLog, cfg.TransitionsOlderThan)
	if err != nil {
		return sum, err
	}
	sum.ConsentCutoff, sum.ConsentEvents, err = ageOut(ctx, pool, cfg, batch, consentLog, cfg.ConsentOlderThan)
	if err != nil {
		return sum, err
	}
	_, sum.KeptReceipts, err = ageOut(ctx, pool, cfg, batch, keptReceipts, KeptReceiptRetention)
	if err != nil {
		return sum, err
	}
	if err := cleanupMessages(ctx, pool, cfg, batch, &sum); err != nil {
		return sum, err
	}
	sum.AuditCutoff, sum.AuditRows, err = ageOut(ctx, pool, cfg, batch, auditLog, cfg.AuditOlderThan)
	if err != nil {
		return sum, err
	}
	sum.RunsCutoff, sum.JobRuns, err = ageOut(ctx, pool, cfg, batch, runsLog, cfg.RunsOlderThan)
	return sum, err
}

// cleanupMessages counts (dry run) or deletes the settled messages past
// sum.Cutoff with their ledger rows, the expired dedupe keys and the old
// request keys, into sum.
func cleanupMessages(ctx context.Context, pool *pgxpool.Pool, cfg CleanupConfig, batch int64, sum *CleanupSummary) error {
	if cfg.DryRun {
		old, err := cleanupCountQuery.One(ctx, pool, cleanupCountArgs{Cutoff: sum.Cutoff})
		if err != nil {
			return fmt.Errorf("count old messages: %w", err)
		}
		sum.Messages, sum.Ledger = old.Messages, old.Ledger
		keys, err := cleanupCountKeysQuery.One(ctx, pool, cleanupCountKeysArgs{AsOf: cfg.AsOf})
		if err != nil {
			return fmt.Errorf("count expired idempotency keys: %w", err)
		}
		sum.IdempotencyKeys = keys.IdempotencyKeys
		fire, err := cleanupCountFireRequestsQuery.One(ctx, pool, cleanupCountFireRequestsArgs{Cutoff: sum.Cutoff})
		if err != nil {
			return fmt.Errorf("count old request keys: %w", err)
		}
		sum.FireRequests = fire.FireRequests
		return nil
	}
	for {
		tag, err := cleanupDeleteFireRequestsQuery.Exec(ctx, pool, cleanupDeleteFireRequestsArgs{Cutoff: sum.Cutoff, N: batch})
		if err != nil {
			return fmt.Errorf("delete old request keys: %w", err)
		}
		sum.FireRequests += tag.RowsAffected()
		if tag.RowsAffected() < batch {
			break
		}
	}
	keys, err := idempotency.NewPostgres(pool, idempotency.Options{}).DeleteExpired(ctx, cfg.AsOf, int(batch))
	if err != nil {
		return fmt.Errorf("delete expired idempotency keys: %w", err)
	}
	sum.IdempotencyKeys = keys
	for {
		deleted, err := cleanupDeleteQuery.One(ctx, pool, cleanupDeleteArgs{Cutoff: sum.Cutoff, N: batch})
		if err != nil {
			return fmt.Errorf("delete old messages: %w", err)
		}
		sum.Messages += deleted.Messages
		sum.Ledger += deleted.Ledger
		if deleted.Messages < batch {
			return nil
		}
	}
}
