// Package sender is the message contract the bot and the jobs share: the
// catalog of texts, the rule for idempotency keys, and Enqueue, which
// queues a message under a key that makes queueing it twice impossible.
// The kinds of message, with their types, catalog keys, key formats and
// periods, are package statemachine's (statemachine.Kinds: a kind's
// Key, CatalogKey, Period). Package delivery sends them; sender/transport
// holds the ways it can.
//
// The database enforces idempotency: engagement_message_queue has a partial
// unique index on idempotency_key, and every insert goes through
// ON CONFLICT, so a re-run, a crashed run or two concurrent runs can never
// create a second row for the same key.
package sender

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Destinations (the destination column).
const (
	DestinationIndividual = "individual"
	DestinationGroup      = "group"
)

// MaxKeyLength is the longest idempotency key, in characters.
const MaxKeyLength = 128

// ErrInvalidKey is wrapped by every error of ValidateKey (and so of
// NormalizeKey and Enqueue) for a key that breaks the rule.
var ErrInvalidKey = errors.New("invalid idempotency key")

// ErrKeyTooLong is wrapped by ValidateKey, NormalizeKey and Enqueue for a
// key over MaxKeyLength characters; it wraps ErrInvalidKey.
var ErrKeyTooLong = fmt.Errorf("%w: longer than %d characters", ErrInvalidKey, MaxKeyLength)

// ErrNoDestination is returned by Enqueue when no JID was given and the
// user's profile has none to route to.
var ErrNoDestination = errors.New("no destination: the user's profile has no JID to route to, and none was given")

// ErrNoCatalogKey is returned by Enqueue when no catalog key was given for
// a message type the scheduler does not know, and the queue requires one
// (the bot's queue declares message_key NOT NULL).
var ErrNoCatalogKey = errors.New("no catalog key: this queue requires message_key, and the message type has no default; give one")

// ErrRefused is wrapped by the *RefusedError Enqueue returns for a message
// the rule of every door does not let go to its user (docs/consent.md):
// engagementctl enqueue exits 2, POST /api/messages answers 409, each
// naming the reason. Nothing was written.
var ErrRefused = errors.New("refused")

// The reasons of a RefusedError.
const (
	// RefusedErased: the user was erased (and has not opted back in).
	RefusedErased = "erased"
	// RefusedOptedOut: a marketing message (any type that is no kind and
	// is not declared otherwise: engagementctl categories) to a user who
	// opted out.
	RefusedOptedOut = "opted_out"
	// RefusedHoldout: a goodbye to a user held out of the current cycle.
	RefusedHoldout = "holdout"
	// RefusedConfirmation: an opt-out's confirmation, which only
	// engagement_opt_out(..., p_confirm => true) queues.
	RefusedConfirmation = "confirmation_without_opt_out"
)

// confirmationGuardCode is the SQLSTATE of the trigger that refuses an
// opt-out's confirmation queued by anything but engagement_opt_out
// (migration 69).
const confirmationGuardCode = "EN010"

// RefusedError says why a message was refused: Reason is one of the
// Refused* constants.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string {
	why := map[string]string{
		RefusedErased:       "the user was erased",
		RefusedOptedOut:     "the user opted out, and the message type is marketing",
		RefusedHoldout:      "the user is held out of this goodbye cycle",
		RefusedConfirmation: "an opt-out's confirmation is queued only by engagement_opt_out",
	}[e.Reason]
	if why == "" {
		why = "not allowed"
	}
	return fmt.Sprintf("refused (%s): %s", e.Reason, why)
}

func (e *RefusedError) Unwrap() error { return ErrRefused }

// ValidateKey is the rule for an idempotency key, as it is stored and as
// queue-process sends it (the webhook's Idempotency-Key header and the
// body's idempotency_key): not empty, at most MaxKeyLength characters of
// UTF-8, no control character (unicode.IsControl: CR, LF, tab, BEL, NUL,
// ESC, DEL, the C1 controls), and no white space around it; a key passes
// exactly when NormalizeKey returns it unchanged. It is one rule for
// everything that handles a key: NormalizeKey (so Enqueue, engagementctl
// enqueue and the jobs) refuses a key that breaks it before anything is
// written, and delivery fails for good a stored key that breaks it (one
// the bot wrote with its own SQL), for the same reason. The error wraps
// ErrInvalidKey and says what is wrong without quoting the key.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	}
	n := 0
	for _, r := range key {
		n++
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: control character %U at character %d (a key is one line of text: no CR, LF, tab or other control characters)", ErrInvalidKey, r, n)
		}
	}
	if n > MaxKeyLength {
		return fmt.Errorf("%w (got %d)", ErrKeyTooLong, n)
	}
	first, _ := utf8.DecodeRuneInString(key)
	last, _ := utf8.DecodeLastRuneInString(key)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		// An HTTP header drops surrounding spaces: " k" and "k" would
		// be one key to the receiver, which would drop one as a repeat.
		return fmt.Errorf("%w: white space around it (a key is trimmed)", ErrInvalidKey)
	}
	return nil
}

// NormalizeKey trims an idempotency key (surrounding white space, CR/LF
// and tab included) and checks what is left against ValidateKey; an empty
// result means no key.
func NormalizeKey(key string) (string, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return "", nil
	}
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// Message is one row to queue.
type Message struct {
	UserID         string
	Type           string
	Key            string            // catalog key; empty for none
	Params         map[string]string // rendered into the text at send time; nil for none
	Destination    string            // DestinationIndividual or DestinationGroup; empty: the profile's routing
	DestinationJID string            // empty: the profile's routing
	ScheduledFor   time.Time         // zero means now (the database clock)
	IdempotencyKey string            // trimmed, then ValidateKey's rule; empty means none: every call queues a new row
	// PeriodStart is the start of the period the idempotency key covers
	// (a kind's statemachine.Kind.Period.Bounds); zero for none.
	PeriodStart time.Time
	// ReplayUntil is the last instant the idempotency key could be
	// produced again: engagementctl cleanup keeps the message until then.
	// Zero for none: the message ages from when it was queued.
	ReplayUntil time.Time
}

// Queued reports the outcome of Enqueue.
type Queued struct {
	ID        string // the queued message, or the one already queued under the key
	Duplicate bool   // the key was already taken; nothing was written
	// PayloadDiffers is set on a duplicate whose stored message differs from
	// the one given (type, catalog key, params or explicit destination): a
	// client replaying a key with new content, which is worth a warning.
	PayloadDiffers bool
}

// Querier is a pgx pool, connection or transaction, so a message can be
// queued inside a caller's transaction.
type Querier = postgres.Querier

// Enqueue queues m unless a message with its idempotency key exists, in which
// case it returns that message's id with Duplicate set and changes nothing.
func Enqueue(ctx context.Context, q Querier, m Message) (Queued, error) {
	if err := m.Validate(); err != nil {
		return Queued{}, err
	}
	key, err := NormalizeKey(m.IdempotencyKey)
	if err != nil {
		return Queued{}, err
	}
	params, err := paramsText(m.Params)
	if err != nil {
		return Queued{}, err
	}
	kind, isKind := sm.KindOf(sm.Message(m.Type))
	if kind.ConfirmsOptOut {
		return Queued{}, &RefusedError{Reason: RefusedConfirmation}
	}
	if m.Key == "" && isKind {
		// A kind's own text, as the jobs queue it: the bot's queue
		// requires a key.
		m.Key = kind.CatalogKey
	}
	row, err := enqueueQuery.One(ctx, q, enqueueArgs{
		UserID: m.UserID, Type: m.Type, Key: m.Key, Params: params,
		Destination: m.Destination, JID: m.DestinationJID,
		ScheduledFor: optionalTime(m.ScheduledFor), IdempotencyKey: key,
		PeriodStart: optionalTime(m.PeriodStart), ReplayUntil: optionalTime(m.ReplayUntil),
		Category: string(kind.Category), Holdout: kind.Holdout,
	})
	if err == nil && row.Refusal != "" {
		return Queued{}, &RefusedError{Reason: row.Refusal}
	}
	var stored map[string]string
	if err == nil && row.Duplicate && row.MessageParams != nil {
		// The stored params, to compare: a JSON object of strings.
		err = json.Unmarshal(row.MessageParams, &stored)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == confirmationGuardCode {
		return Queued{}, &RefusedError{Reason: RefusedConfirmation}
	}
	if errors.As(err, &pgErr) && pgErr.Code == "23502" && pgErr.ColumnName == "destination_jid" {
		return Queued{}, ErrNoDestination
	}
	if errors.As(err, &pgErr) && pgErr.Code == "23502" && pgErr.ColumnName == "message_key" {
		return Queued{}, ErrNoCatalogKey
	}
	if err != nil {
		return Queued{}, fmt.Errorf("enqueue %s message: %w", m.Type, err)
	}
	out := Queued{ID: row.ID, Duplicate: row.Duplicate}
	if out.Duplicate {
		out.PayloadDiffers = row.MessageType != m.Type || row.MessageKey != m.Key ||
			!maps.Equal(stored, m.Params) || // a nil and an empty map are equal
			m.Destination != "" && row.Destination != m.Destination ||
			m.DestinationJID != "" && row.DestinationJID != strings.TrimSpace(m.DestinationJID)
	}
	return out, nil
}

// paramsText is a message's params as the statement takes them: a JSON
// object, as text (nil when the message has none). JSON goes as text: in
// pgx's exec mode (the default, for transaction poolers) a []byte would
// be sent as bytea.
func paramsText(p map[string]string) (*string, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode params: %w", err)
	}
	s := string(b)
	return &s, nil
}

// optionalTime is t, or nil (SQL NULL) when t is zero.
func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
