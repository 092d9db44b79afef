// Package erase removes a person from what the scheduler keeps (LGPD's
// right to erasure; engagementctl erase and the console): every trace of
// their WhatsApp id and of their messages' contents in the engagement_*
// tables and the queue, in one transaction, and opts them out so that
// nothing is sent to them afterwards. What it keeps, and why, is in
// queries/erase_scrub.sql and docs/operations.md ("Erase").
package erase

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// Source is the consent source Erase records its opt-out with unless
// Options.Source names another.
const Source = "erase"

// ErrUnknownUser is returned for a user id that neither user_profiles nor
// any of the scheduler's tables knows: nothing to erase, nothing changed.
// It wraps activity.ErrUnknownUser.
var ErrUnknownUser = fmt.Errorf("erase: %w", activity.ErrUnknownUser)

// ErrBadUserID is returned for a user id that is not a UUID.
var ErrBadUserID = errors.New("erase: the user id must be a UUID")

// DB is what Erase runs on: a pool, a connection, or a transaction the
// caller opened (the console, to write its audit row in the same
// transaction; Erase then works in a savepoint of it and commits nothing).
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Options are Erase's optional arguments.
type Options struct {
	// Source is the opt-out's consent source; Source ("erase") when empty.
	Source string
	// Actor is the operator who erased, if known (recorded with the
	// opt-out).
	Actor string
}

// Report counts, per table, the rows Erase changed (JSON for
// engagementctl erase --output json and the console).
type Report struct {
	UserID string `json:"user_id"`
	// OptedOut is true when Erase opted the user out; false when they had
	// opted out already, or have no profile (user_profiles: the bot's;
	// without one nothing can be sent to them).
	OptedOut bool `json:"opted_out"`
	// Profile is whether user_profiles has the user (the bot's row, which
	// erase does not touch: the bot erases it).
	Profile bool `json:"profile"`
	// Messages counts the user's queue rows scrubbed (kept, for the
	// funnel's counts, without JID, params, error text or provider id);
	// Cancelled those of them that were pending. A message in flight
	// (claimed by a queue-process) is left to its holder, which checks it
	// again before its request and cancels it, or records it sent when
	// its request had gone out (queries/erase_scrub.sql).
	Messages  int64 `json:"messages"`
	Cancelled int64 `json:"cancelled"`
	// Ledger counts the send ledger rows scrubbed.
	Ledger int64 `json:"ledger"`
	// BudgetRecipients and BudgetClaims count the send budget's rows whose
	// MD5 of the user's JID was replaced by a random id.
	BudgetRecipients int64 `json:"budget_recipients"`
	BudgetClaims     int64 `json:"budget_claims"`
	// FireRequests counts the bot's request keys of the user deleted.
	FireRequests int64 `json:"fire_requests"`
	// IdempotencyKeys counts dedupe keys holding one of the user's JIDs,
	// deleted.
	IdempotencyKeys int64 `json:"idempotency_keys"`
	// ConsoleAudit counts the console's audit rows naming the user whose
	// filter values (but the user id) and reason were replaced.
	ConsoleAudit int64 `json:"console_audit"`
	// JobRuns counts job runs whose error or counters held one of the
	// user's JIDs, replaced.
	JobRuns int64 `json:"job_runs"`
}

// Erase erases userID with the default Options.
func Erase(ctx context.Context, db DB, userID string) (Report, error) {
	return EraseWith(ctx, db, userID, Options{})
}

// EraseWith erases userID, in one transaction (a savepoint when db is
// one): opts them out (activity.OptOut, source o.Source, when they have a
// profile and had not), which cancels their pending messages, then scrubs
// their WhatsApp ids and message contents from the scheduler's tables
// (queries/erase_scrub.sql), records the erasure (engagement_erasures),
// which shuts every door to them: nothing of any type is queued, claimed
// or sent to them until they opt back in (docs/consent.md), and marks the
// wish (queries/erase_wish.sql) that the queue-process runs holding the
// user's claimed messages read within 150 ms of the commit, to check them
// again before their requests. A second erase of the same user changes
// nothing more and succeeds. Errors: ErrBadUserID, ErrUnknownUser (nothing
// changed), or the database's; on any error nothing is changed. Errors
// never hold a JID or a message's text.
func EraseWith(ctx context.Context, db DB, userID string, o Options) (Report, error) {
	id, ok := postgres.ParseUUID(strings.TrimSpace(userID))
	if !ok {
		return Report{}, ErrBadUserID
	}
	rep := Report{UserID: id}
	if o.Source == "" {
		o.Source = Source
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("erase: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	found, err := eraseFindQuery.One(ctx, tx, eraseFindArgs{UserID: rep.UserID})
	if err != nil {
		return Report{}, fmt.Errorf("erase: find the user: %w", err)
	}
	rep.Profile = found.Profile
	if !found.Profile && !found.Traces {
		return Report{}, fmt.Errorf("%w %s", ErrUnknownUser, rep.UserID)
	}
	if rep.Profile {
		rep.OptedOut, err = activity.OptOut(ctx, tx, rep.UserID, o.Source, activity.ConsentOptions{Actor: o.Actor})
		if err != nil {
			return Report{}, fmt.Errorf("erase: %w", err)
		}
	}
	if _, err := eraseRecordQuery.Exec(ctx, tx, eraseRecordArgs{UserID: rep.UserID}); err != nil {
		return Report{}, fmt.Errorf("erase: record the erasure: %w", err)
	}
	if _, err := eraseLockQuery.Exec(ctx, tx, eraseLockArgs{UserID: rep.UserID}); err != nil {
		return Report{}, fmt.Errorf("erase: lock the messages: %w", err)
	}
	scrubbed, err := eraseScrubQuery.One(ctx, tx, eraseScrubArgs{UserID: rep.UserID})
	if err != nil {
		return Report{}, fmt.Errorf("erase: scrub: %w", err)
	}
	rep.Messages, rep.Cancelled, rep.Ledger = scrubbed.Messages, scrubbed.Cancelled, scrubbed.Ledger
	rep.BudgetRecipients, rep.BudgetClaims = scrubbed.BudgetRecipients, scrubbed.BudgetClaims
	rep.FireRequests, rep.IdempotencyKeys = scrubbed.FireRequests, scrubbed.IdempotencyKeys
	rep.ConsoleAudit, rep.JobRuns = scrubbed.ConsoleAudit, scrubbed.JobRuns
	if _, err := eraseWishQuery.Exec(ctx, tx, eraseWishArgs{UserID: rep.UserID}); err != nil {
		return Report{}, fmt.Errorf("erase: mark the wish: %w", err)
	}
	if rep.OptedOut {
		rep.Cancelled += found.Pending // the opt-out cancelled them; the scrub found them cancelled
	}
	if err := tx.Commit(ctx); err != nil {
		return Report{}, fmt.Errorf("erase: commit: %w", err)
	}
	return rep, nil
}
