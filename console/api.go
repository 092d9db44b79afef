package console

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/sender"
)

// The console's HTTP API: POST /api/messages queues one message as
// engagementctl enqueue does (the same checks, sender.Request, and the
// same one-statement idempotent insert, sender.Enqueue), for operators,
// with an audit row; GET /api/openapi.json describes it.
//
// Cross-site requests: the API takes application/json only. A form on
// another site can send only form-encoded, multipart or text/plain
// bodies, and a script on another site cannot send application/json to
// the console without a CORS preflight the console never answers, so no
// CSRF token is needed; the cross-origin check (Sec-Fetch-Site, Origin)
// in front of every POST refuses the rest.

//go:embed openapi.json
var openAPIDocument []byte

// maxAPIBody bounds a request body.
const maxAPIBody = 64 << 10

// maxReason is the longest reason an audit row keeps, in characters.
const maxReason = 500

// APIMessage is a queued message as POST /api/messages answers it: what
// the console shows of a message anywhere, never its params (the text's
// contents) nor more of its JID than the last four digits.
type APIMessage struct {
	ID             string     `json:"id"`
	UserID         string     `json:"user_id"`
	Type           string     `json:"type"`
	Key            string     `json:"key,omitempty"`
	Destination    string     `json:"destination"`
	JID            string     `json:"jid"`
	Status         string     `json:"status"`
	ScheduledFor   time.Time  `json:"scheduled_for"`
	SentAt         *time.Time `json:"sent_at"`
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	PeriodStart    *time.Time `json:"period_start,omitempty"`
	ReplayUntil    *time.Time `json:"replay_until,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	// Created is true for a new message (201), false for a replay of its
	// idempotency key (200).
	Created bool `json:"created"`
	// PayloadDiffers is set on a replay whose request differs from the
	// message that stands (type, catalog key, params or destination).
	PayloadDiffers bool `json:"payload_differs,omitempty"`
	// AuditID is the audit row of a new message.
	AuditID int64 `json:"audit_id,omitempty"`
}

// APIError is every error the API answers.
type APIError struct {
	Error string `json:"error"`
	Code  int    `json:"code"`
	// Field is the body's field (or the Idempotency-Key header) at fault,
	// when one is.
	Field string `json:"field,omitempty"`
	// Reason is why a message was refused (409): erased, opted_out,
	// holdout or confirmation_without_opt_out (docs/consent.md).
	Reason string `json:"reason,omitempty"`
}

// enqueueBody is POST /api/messages' body: engagementctl enqueue's fields
// and an optional reason for the audit.
type enqueueBody struct {
	sender.Request
	Reason string `json:"reason,omitempty"`
}

func (s *server) apiFail(w http.ResponseWriter, code int, field, msg string) {
	writeJSON(w, code, APIError{Error: msg, Code: code, Field: field})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// openAPI serves GET /api/openapi.json.
func (s *server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDocument)
}

// enqueue serves POST /api/messages.
func (s *server) enqueue(w http.ResponseWriter, r *http.Request) {
	u := requestUser(r)
	m, reason, no := readEnqueue(w, r, u)
	if no != nil {
		s.apiFail(w, no.code, no.field, no.msg)
		return
	}
	out, err := s.enqueueAudited(r.Context(), u, m, reason)
	if err != nil {
		s.enqueueFailed(w, u, err)
		return
	}
	code := http.StatusOK
	if out.Created {
		code = http.StatusCreated
		for _, c := range s.caches { // the queue's counts have changed: read them again, in the background
			c.invalidate()
		}
	}
	ev := s.cfg.Logger.Info()
	if out.PayloadDiffers {
		ev = s.cfg.Logger.Warn()
	}
	ev.Str("actor", u.Name).Str("message_id", out.ID).Str("type", out.Type).Bool("created", out.Created).
		Bool("payload_differs", out.PayloadDiffers).Int64("audit_id", out.AuditID).Msg("message enqueued over the API")
	writeJSON(w, code, out)
}

// apiRefusal is why the API refuses a request: its status, the field at
// fault ("" for none) and what to say.
type apiRefusal struct {
	code       int
	field, msg string
}

// readEnqueue reads POST /api/messages: the operator's, a JSON body of the
// API's fields, one Idempotency-Key header at most (the body's key, if
// any, the same), a reason fit for the audit row.
func readEnqueue(w http.ResponseWriter, r *http.Request, u user) (sender.Message, string, *apiRefusal) {
	if !u.Operator {
		return sender.Message{}, "", &apiRefusal{http.StatusForbidden, "", "only operators may queue messages; you may look"}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return sender.Message{}, "", &apiRefusal{http.StatusUnsupportedMediaType, "", "the body must be JSON, sent as Content-Type: application/json"}
	}
	var body enqueueBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAPIBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return sender.Message{}, "", &apiRefusal{http.StatusRequestEntityTooLarge, "", fmt.Sprintf("the body is over %d bytes", maxAPIBody)}
		}
		return sender.Message{}, "", &apiRefusal{http.StatusBadRequest, "", "the body is not a JSON object of the API's fields: " + jsonProblem(err)}
	}
	if dec.More() {
		return sender.Message{}, "", &apiRefusal{http.StatusBadRequest, "", "the body holds more than one JSON value"}
	}
	m, err := body.Message()
	if err != nil {
		var fe *sender.FieldError
		if errors.As(err, &fe) {
			return m, "", &apiRefusal{http.StatusBadRequest, fe.Field, err.Error()}
		}
		return m, "", &apiRefusal{http.StatusBadRequest, "", err.Error()}
	}
	if no := idempotencyHeader(r, &m); no != nil {
		return m, "", no
	}
	reason, err := cleanReason(body.Reason)
	if err != nil {
		return m, "", &apiRefusal{http.StatusBadRequest, "reason", "reason: " + err.Error()}
	}
	return m, reason, nil
}

// idempotencyHeader sets m's key from the Idempotency-Key header, if
// there is one.
func idempotencyHeader(r *http.Request, m *sender.Message) *apiRefusal {
	headers := r.Header.Values("Idempotency-Key")
	switch {
	case len(headers) > 1:
		return &apiRefusal{http.StatusBadRequest, "Idempotency-Key", "Idempotency-Key: give one header, not several"}
	case len(headers) == 0:
		return nil
	}
	key, err := sender.NormalizeKey(headers[0])
	if err != nil {
		return &apiRefusal{http.StatusBadRequest, "Idempotency-Key", "Idempotency-Key: " + err.Error()}
	}
	if m.IdempotencyKey != "" && key != m.IdempotencyKey {
		return &apiRefusal{http.StatusBadRequest, "Idempotency-Key",
			"the Idempotency-Key header and the body's idempotency_key differ: give one, or the same in both"}
	}
	m.IdempotencyKey = key
	return nil
}

// enqueueFailed answers a message the API could not queue.
func (s *server) enqueueFailed(w http.ResponseWriter, u user, err error) {
	var refused *sender.RefusedError
	switch {
	case errors.As(err, &refused):
		writeJSON(w, http.StatusConflict, APIError{Error: refused.Error(), Code: http.StatusConflict, Reason: refused.Reason})
	case errors.Is(err, sender.ErrNoDestination):
		s.apiFail(w, http.StatusBadRequest, "jid", "jid: "+err.Error())
	case errors.Is(err, sender.ErrNoCatalogKey):
		s.apiFail(w, http.StatusBadRequest, "key", "key: "+err.Error())
	case isForeignKey(err):
		s.apiFail(w, http.StatusBadRequest, "user_id", "user_id: no such user")
	default:
		s.cfg.Logger.Error().Err(err).Str("actor", u.Name).Msg("enqueue failed")
		s.apiFail(w, http.StatusInternalServerError, "", "the message could not be queued; nothing was changed (see the console's log)")
	}
}

// enqueueAudited queues m and, when it is new, writes its audit row, in
// one transaction; it returns the message that stands under m's key.
func (s *server) enqueueAudited(ctx context.Context, u user, m sender.Message, reason string) (*APIMessage, error) {
	tx, err := s.cfg.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after a commit, or a failure's end
	if err := limit(ctx, tx, s.cfg.StatementTimeout); err != nil {
		return nil, err
	}
	q, err := sender.Enqueue(ctx, tx, m)
	if err != nil {
		return nil, err
	}
	out := APIMessage{Created: !q.Duplicate, PayloadDiffers: q.PayloadDiffers}
	row, err := apiMessageQuery.One(ctx, tx, apiMessageArgs{ID: q.ID})
	if err != nil {
		return nil, fmt.Errorf("read the queued message back: %w", err)
	}
	out.ID, out.UserID, out.Type, out.Key, out.Destination, out.JID = row.ID, row.UserID, row.MessageType, row.MessageKey, row.Destination, row.JIDLast4
	out.Status, out.ScheduledFor, out.SentAt, out.IdempotencyKey = row.Status, row.ScheduledFor, row.SentAt, row.IdempotencyKey
	out.PeriodStart, out.ReplayUntil, out.CreatedAt = row.PeriodStart, row.ReplayUntil, row.CreatedAt
	if out.JID != "" {
		out.JID = "••••" + out.JID
	}
	if !out.Created {
		return &out, nil // nothing changed: nothing to audit
	}
	// JSON goes to jsonb as text: in pgx's exec mode (internal/postgres)
	// a []byte is sent as bytea.
	filter, err := json.Marshal(map[string]any{"message_id": out.ID, "user_id": out.UserID, "type": out.Type,
		"key": out.Key, "idempotency_key": out.IdempotencyKey, "scheduled_for": out.ScheduledFor})
	if err != nil {
		return nil, err
	}
	audit, err := auditInsertQuery.One(ctx, tx, auditInsertArgs{
		Actor: u.Name, Action: "enqueue", Filter: string(filter), Messages: 1, Reason: reason,
	})
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	out.AuditID = audit.ID
	return &out, tx.Commit(ctx)
}

// cleanReason trims an operator's reason for an action and checks it: at
// most maxReason characters of UTF-8 on one line; empty for none.
func cleanReason(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) {
		return "", errors.New("not valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > maxReason {
		return "", fmt.Errorf("%d characters, at most %d", n, maxReason)
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return "", errors.New("holds a control character (a reason is one line of text)")
	}
	return s, nil
}

// isForeignKey reports a foreign-key violation: on the bot's database the
// queue's user_id references its users.
func isForeignKey(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

// jsonProblem says what is wrong with a body, short.
func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.As(err, &syntax):
		return fmt.Sprintf("malformed JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("%s must be %s, not a JSON %s", typ.Field, typ.Type, typ.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
