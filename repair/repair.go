// Package repair is the operator's hand on the queue: requeue messages that
// failed or were cancelled (engagementctl requeue) and cancel pending ones
// (engagementctl cancel), by id or by filters, each in one statement that
// leaves a message some queue-process holds to its claim.
package repair

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// ErrBadFilter reports a repair filter that cannot select anything sensible;
// the message names the flag (engagementctl maps it to exit 2). Every such
// error is a *FilterError, which can also name the fields another way.
var ErrBadFilter = errors.New("bad filter")

// FilterError is a bad filter: what is wrong with it, naming the filter's
// fields. Error names them as engagementctl's flags ("bad filter: --ids:
// "42" is not a UUID"); In names them as another surface does (the
// console's form says "message ids").
type FilterError struct {
	// format holds the message with each field as {field}: {ids},
	// {user_id}, {type}, {key}, {all}, {status}, {reason}, {since},
	// {until}.
	format string
	args   []any
}

func badFilter(format string, args ...any) error { return &FilterError{format: format, args: args} }

// Error is the message as engagementctl says it, after "bad filter: ".
func (e *FilterError) Error() string { return ErrBadFilter.Error() + ": " + e.In(Flag) }

// Unwrap makes errors.Is(err, ErrBadFilter) true.
func (e *FilterError) Unwrap() error { return ErrBadFilter }

// In is the message with each field named by name (its argument is the
// field: "ids", "user_id", "type", "key", "all", "status", "reason",
// "since", "until").
func (e *FilterError) In(name func(field string) string) string {
	format := fieldRef.ReplaceAllStringFunc(e.format, func(ref string) string {
		return strings.ReplaceAll(name(ref[1:len(ref)-1]), "%", "%%")
	})
	return fmt.Sprintf(format, e.args...)
}

var fieldRef = regexp.MustCompile(`\{[a-z_]+\}`)

// Flag names a field as engagementctl's flag: "user_id" is "--user-id".
func Flag(field string) string { return "--" + strings.ReplaceAll(field, "_", "-") }

// RequeueFilter selects the messages Requeue puts back in the queue. Every
// field given must match; zero fields match everything.
type RequeueFilter struct {
	// Status is sm.StatusFailed (the default when empty) or sm.StatusCancelled.
	Status string
	// Type matches message_type exactly.
	Type string
	// Since (inclusive) and Until (exclusive) bound when the message
	// settled: its last attempt, or when it came due if no attempt came
	// after that (see queries/ops_requeue.sql).
	Since, Until time.Time
	// IDs are message ids (UUIDs).
	IDs []string
	// ErrorContains matches error_message, case-insensitively.
	ErrorContains string
	// ErrorGroup matches the failure's reason group exactly: its error
	// text with ids and long numbers masked (engagement_error_group,
	// migration 31), as the console's queue page groups failures.
	ErrorGroup string
	// Reason matches cancel_reason (one of sm.CancelReasons); only with sm.StatusCancelled.
	Reason string
}

// Validate fills the default status and rejects a filter that names an
// unknown status or reason, a malformed id or an empty time window. Errors
// wrap ErrBadFilter and name the engagementctl flag.
func (f *RequeueFilter) Validate() error {
	if f.Status == "" {
		f.Status = sm.StatusFailed
	}
	if f.Status != sm.StatusFailed && f.Status != sm.StatusCancelled {
		return badFilter("{status} must be failed or cancelled, got %q", f.Status)
	}
	if f.Reason != "" {
		if f.Status != sm.StatusCancelled {
			return badFilter("{reason} applies to {status} cancelled only")
		}
		if !slices.Contains(sm.CancelReasons(), f.Reason) {
			return badFilter("{reason} must be one of %s, got %q", strings.Join(sm.CancelReasons(), ", "), f.Reason)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return badFilter("{since} %s is not before {until} %s", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	ids, err := normalizeIDs(f.IDs)
	if err != nil {
		return err
	}
	f.IDs = ids
	return nil
}

// CancelFilter selects the pending messages Cancel cancels. Every field
// given must match; with none, All must be set.
type CancelFilter struct {
	IDs    []string // message ids (UUIDs)
	UserID string   // user_id (UUID)
	Type   string   // message_type, exactly
	Key    string   // idempotency_key, exactly (trimmed)
	// All cancels every pending message; it cannot be combined with the
	// filters above.
	All bool
}

// Validate rejects an empty filter without All, All with a filter, and
// malformed ids or keys. Errors wrap ErrBadFilter and name the flag.
func (f *CancelFilter) Validate() error {
	ids, err := normalizeIDs(f.IDs)
	if err != nil {
		return err
	}
	f.IDs = ids
	if f.UserID = strings.TrimSpace(f.UserID); f.UserID != "" {
		id, ok := postgres.ParseUUID(f.UserID)
		if !ok {
			return badFilter("{user_id} %q is not a UUID", f.UserID)
		}
		f.UserID = id
	}
	f.Type = strings.TrimSpace(f.Type)
	if f.Key, err = sender.NormalizeKey(f.Key); err != nil {
		return badFilter("{key}: %v", err)
	}
	filtered := len(f.IDs) > 0 || f.UserID != "" || f.Type != "" || f.Key != ""
	switch {
	case !filtered && !f.All:
		return badFilter("give at least one of {ids}, {user_id}, {type}, {key}, or {all} to cancel every pending message")
	case filtered && f.All:
		return badFilter("{all} cancels every pending message; it cannot be combined with {ids}, {user_id}, {type} or {key}")
	}
	return nil
}

// normalizeIDs parses ids as UUIDs, dropping blanks and repeats.
func normalizeIDs(ids []string) ([]string, error) {
	out := []string{}
	for _, s := range ids {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		id, ok := postgres.ParseUUID(s)
		if !ok {
			return nil, badFilter("{ids}: %q is not a UUID", s)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// Requeue puts the messages f selects back to pending, due now, retry count
// 0, error and cancel reason cleared, same id and idempotency key, in one
// statement that touches only rows still in f.Status (never one in flight).
// It returns how many it requeued or, with dryRun, would requeue.
func Requeue(ctx context.Context, db postgres.Querier, f RequeueFilter, dryRun bool) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	row, err := opsRequeueQuery.One(ctx, db, opsRequeueArgs{
		Status:        f.Status,
		IDs:           f.IDs,
		MessageType:   nullIfEmpty(f.Type),
		Reason:        nullIfEmpty(f.Reason),
		ErrorContains: nullIfEmpty(f.ErrorContains),
		ErrorGroup:    nullIfEmpty(f.ErrorGroup),
		Since:         nullIfZero(f.Since),
		Until:         nullIfZero(f.Until),
		DryRun:        dryRun,
	})
	if err != nil {
		return 0, fmt.Errorf("requeue %s messages: %w", f.Status, err)
	}
	return row.Requeued, nil
}

// Cancel cancels the pending messages f selects (cancel_reason 'operator'),
// in one statement that touches only rows still pending: a message a
// queue-process has claimed is left to it. It returns how many it cancelled
// or, with dryRun, would cancel.
func Cancel(ctx context.Context, db postgres.Querier, f CancelFilter, dryRun bool) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	row, err := opsCancelQuery.One(ctx, db, opsCancelArgs{
		IDs:            f.IDs,
		UserID:         nullIfEmpty(f.UserID),
		MessageType:    nullIfEmpty(f.Type),
		IdempotencyKey: nullIfEmpty(f.Key),
		All:            f.All,
		DryRun:         dryRun,
	})
	if err != nil {
		return 0, fmt.Errorf("cancel pending messages: %w", err)
	}
	return row.Cancelled, nil
}

func nullIfZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// nullIfEmpty is s, or nil (SQL NULL) when s is empty.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
