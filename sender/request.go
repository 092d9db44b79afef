package sender

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// Request is a message to queue as a caller spells it, every field as
// text: the flags of engagementctl enqueue and the JSON body of the
// console's POST /api/messages name the same fields (the JSON names; a
// flag is the name with dashes: user_id is --user-id). Message checks it
// and builds the Message to pass to Enqueue, so that both accept and
// refuse the same requests for the same reasons.
type Request struct {
	UserID      string `json:"user_id"`
	Type        string `json:"type"`
	Key         string `json:"key,omitempty"`
	Destination string `json:"destination,omitempty"`
	JID         string `json:"jid,omitempty"`
	// Params is a JSON object of strings; empty or null for none.
	Params json.RawMessage `json:"params,omitempty"`
	// ScheduledFor, PeriodStart and ReplayUntil are RFC 3339 instants,
	// empty for none.
	ScheduledFor   string `json:"scheduled_for,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	PeriodStart    string `json:"period_start,omitempty"`
	ReplayUntil    string `json:"replay_until,omitempty"`
}

// ErrInvalidRequest is wrapped by every error of Request.Message.
var ErrInvalidRequest = errors.New("invalid message request")

// FieldError says which field of a Request is wrong, and why; it wraps
// ErrInvalidRequest and the cause (ErrInvalidKey for a bad key). Problem
// never quotes an idempotency key or a params value.
type FieldError struct {
	Field   string // the JSON name, e.g. user_id
	Problem string
	err     error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Unwrap returns ErrInvalidRequest and the cause, if any.
func (e *FieldError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrInvalidRequest}
	}
	return []error{ErrInvalidRequest, e.err}
}

func fieldErrorf(field, format string, args ...any) *FieldError {
	err := fmt.Errorf(format, args...)
	return &FieldError{Field: field, Problem: err.Error(), err: errors.Unwrap(err)}
}

// Message checks the request and returns the message it asks for: a UUID
// user id, a type, params as a JSON object of strings, RFC 3339 instants,
// a key within ValidateKey's rule once trimmed, and the rest of
// Message.Validate's rules (a JID WhatsApp accepts, bounded type, catalog
// key and params, instants in a sane range). The first problem found is
// returned as a *FieldError.
func (r Request) Message() (Message, error) {
	var m Message
	id, ok := postgres.ParseUUID(strings.TrimSpace(r.UserID))
	if !ok {
		return m, fieldErrorf("user_id", "%q is not a UUID", truncateRunes(r.UserID, 60))
	}
	m.UserID = id
	if m.Type = strings.TrimSpace(r.Type); m.Type == "" {
		return m, fieldErrorf("type", "is required (e.g. goodbye, weekly_review, reminder)")
	}
	m.Key = strings.TrimSpace(r.Key)
	m.Destination, m.DestinationJID = r.Destination, r.JID
	if p := bytes.TrimSpace(r.Params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		if err := json.Unmarshal(p, &m.Params); err != nil {
			return m, fieldErrorf("params", `must be a JSON object of strings, like {"count":"3"}: %w`, err)
		}
	}
	now := time.Now()
	for _, f := range []struct {
		field, value string
		into         *time.Time
	}{{"scheduled_for", r.ScheduledFor, &m.ScheduledFor}, {"period_start", r.PeriodStart, &m.PeriodStart}, {"replay_until", r.ReplayUntil, &m.ReplayUntil}} {
		if strings.TrimSpace(f.value) == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(f.value))
		if err != nil {
			return m, fieldErrorf(f.field, "%q is not an RFC 3339 instant (like 2026-11-23T09:00:00Z)", truncateRunes(f.value, 60))
		}
		// Checked here too: 0001-01-01T00:00:00Z is the zero time, which
		// the message would take for "none" (now).
		if err := validateInstant(f.field, t, now); err != nil {
			return m, err
		}
		*f.into = t
	}
	// The rule delivery applies to a stored key (ValidateKey): a key it
	// would refuse is refused here, before anything is written.
	key, err := NormalizeKey(r.IdempotencyKey)
	if err != nil {
		return m, fieldErrorf("idempotency_key", "%w", err)
	}
	m.IdempotencyKey = key
	return m, m.Validate()
}

// truncateRunes cuts s to n runes, so that an error quoting what it was
// given stays short.
func truncateRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i] + "…"
		}
		n--
	}
	return s
}
