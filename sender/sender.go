// Package sender queues the messages the engagement jobs decide to send, each
// under an idempotency key that makes queueing it twice impossible, and (in
// queue-process) delivers them.
//
// The database enforces idempotency: engagement_message_queue has a partial
// unique index on idempotency_key, and every insert goes through
// ON CONFLICT, so a re-run, a crashed run or two concurrent runs can never
// create a second row for the same key.
package sender

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Message types (the engagement_message_queue.message_type column).
const (
	TypeGoodbye      = "goodbye"
	TypeWeeklyReview = "weekly_review"
	TypeReminder     = "reminder"
)

// Message catalog keys (the message_key column), rendered at send time.
const (
	KeyGoodbye      = "engagement.goodbye.self_select"
	KeyWeeklyReview = "engagement.weekly_review.celebration"
)

// Destinations (the destination column).
const (
	DestinationIndividual = "individual"
	DestinationGroup      = "group"
)

// GoodbyeKeySuffix is what follows the user id in a goodbye's idempotency key:
// ":goodbye_sent:YYYY-MM-DD", the UTC date of asOf. Set-based queries build
// keys as user_id::text || GoodbyeKeySuffix(asOf), so the format lives here only.
func GoodbyeKeySuffix(asOf time.Time) string {
	return ":goodbye_sent:" + asOf.UTC().Format(time.DateOnly)
}

// GoodbyeKey is the idempotency key of userID's goodbye on asOf's UTC date.
func GoodbyeKey(userID string, asOf time.Time) string {
	return userID + GoodbyeKeySuffix(asOf)
}

// ISOWeek formats t's ISO 8601 week-numbering year and week in UTC, like
// "2026-W48". 2027-01-01 is in 2026-W53 and 2025-12-29 in 2026-W01.
func ISOWeek(t time.Time) string {
	year, week := t.UTC().ISOWeek()
	return fmt.Sprintf("%04d-W%02d", year, week)
}

// WeeklyReviewKeySuffix is what follows the user id in a weekly review's
// idempotency key: ":weekly_review:YYYY-Www" (see ISOWeek).
func WeeklyReviewKeySuffix(asOf time.Time) string {
	return ":weekly_review:" + ISOWeek(asOf)
}

// ReminderKey is the idempotency key of a reminder due at remindAt.
func ReminderKey(userID string, remindAt time.Time) string {
	return userID + ":reminder:" + strconv.FormatInt(remindAt.UnixMilli(), 10)
}

// Routing, as SQL over a user_profiles row aliased p, so set-based queries
// route exactly as the contract says: destination 'group' uses group_jid
// when set, else falls back to 'individual' and whatsapp_jid. A user with
// neither has no destination and gets no message.
const (
	routesToGroupSQL = `(p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> '')`
	// HasDestinationSQL is true when the user can be sent a message.
	HasDestinationSQL = `(` + routesToGroupSQL + ` OR coalesce(btrim(p.whatsapp_jid), '') <> '')`
	// DestinationSQL is the destination column's value.
	DestinationSQL = `CASE WHEN ` + routesToGroupSQL + ` THEN 'group' ELSE 'individual' END`
	// DestinationJIDSQL is the destination_jid column's value.
	DestinationJIDSQL = `btrim(CASE WHEN ` + routesToGroupSQL + ` THEN p.group_jid ELSE p.whatsapp_jid END)`
)

// Message is one row to queue.
type Message struct {
	UserID         string
	Type           string
	Key            string            // catalog key; empty for none
	Params         map[string]string // rendered into the text at send time; nil for none
	Destination    string            // DestinationIndividual or DestinationGroup
	DestinationJID string
	ScheduledFor   time.Time // zero means now (the database clock)
	IdempotencyKey string    // empty means none: every call queues a new row
}

// Queued reports the outcome of Enqueue.
type Queued struct {
	ID        string // the queued message, or the one already queued under the key
	Duplicate bool   // the key was already taken; nothing was written
}

// Querier is the part of a pgx pool, connection or transaction Enqueue needs,
// so a message can be queued inside a caller's transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// enqueueSQL inserts a message or, when its idempotency key is taken, returns
// the existing row: one round trip, atomic under concurrent callers. The
// conflict arm rewrites the key with itself so that RETURNING yields the
// existing row (DO NOTHING would return nothing); no column changes value.
// xmax is non-zero exactly when the row was not freshly inserted.
const enqueueSQL = `
INSERT INTO engagement_message_queue
       (user_id, message_type, message_key, message_params, destination, destination_jid,
        scheduled_for, idempotency_key)
VALUES ($1, $2, NULLIF($3, ''), coalesce($4::jsonb, '{}'), $5, $6,
        coalesce($7, now()), NULLIF($8, ''))
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
DO UPDATE SET idempotency_key = EXCLUDED.idempotency_key
RETURNING id::text, (xmax <> 0) AS duplicate`

// Enqueue queues m unless a message with its idempotency key exists, in which
// case it returns that message's id with Duplicate set and changes nothing.
func Enqueue(ctx context.Context, q Querier, m Message) (Queued, error) {
	var params []byte
	if m.Params != nil {
		var err error
		if params, err = json.Marshal(m.Params); err != nil {
			return Queued{}, fmt.Errorf("encode params: %w", err)
		}
	}
	var scheduledFor *time.Time
	if !m.ScheduledFor.IsZero() {
		scheduledFor = &m.ScheduledFor
	}
	var out Queued
	err := q.QueryRow(ctx, enqueueSQL,
		m.UserID, m.Type, m.Key, params, m.Destination, m.DestinationJID, scheduledFor, m.IdempotencyKey,
	).Scan(&out.ID, &out.Duplicate)
	if err != nil {
		return Queued{}, fmt.Errorf("enqueue %s message: %w", m.Type, err)
	}
	return out, nil
}
