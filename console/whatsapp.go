package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/rs/zerolog"
)

// WhatsAppWebhook is Meta's webhook for the app that sends through the
// Cloud API (../shared/CONTRACT.md, round six): the console serves it at
// WhatsAppWebhookPath, outside its own authentication, when AppSecret is
// set.
//
// Meta subscribes the URL with a GET carrying hub.verify_token, which must
// be VerifyToken, and signs every POST with the app's secret
// (X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>). Each
// statuses[] entry of a signed POST is applied as a receipt
// (engagement_receipt): delivered, read, and failures WhatsApp reports
// after accepting a message; a status's pricing (billable, category), when
// it carries one, is kept on the message for what it costs; each
// user_preferences[] entry (a user who stopped or resumed marketing
// messages) is applied as an opt-out or opt-in; each
// phone_number_quality_update, business_capability_update and
// message_template_status_update change (Meta's verdict on the number,
// its portfolio's messaging limit and its templates) is recorded for the
// next queue-process run (whatsapp_verdict.go), and so is each completed
// template_category_update (the template's latest category, which the
// run routes by; whatsapp_category.go). See
// https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/status/
type WhatsAppWebhook struct {
	AppSecret   string
	VerifyToken string
}

// WhatsAppWebhookPath is where the console serves Meta's webhook.
const WhatsAppWebhookPath = "/webhooks/whatsapp"

// MaxWhatsAppBody is the largest webhook body read: Meta's payloads are at
// most 3 MB. A larger body is refused (413) before its signature is
// checked: Meta never sends one, so no retry follows.
const MaxWhatsAppBody = 3 << 20

// metaBody is the part of Meta's webhook body the scheduler reads, one
// level at a time: each entry, each change and each of a change's
// statuses[] and user_preferences[] is decoded on its own
// (whatsapp_entry.go), so that one odd part (a field of the wrong type, a
// NUL) spoils itself alone, not the rest of the body.
type metaBody struct {
	Entry []json.RawMessage `json:"entry"`
}

// metaEntry is one entry[] of the body.
type metaEntry struct {
	// Time is when Meta triggered the webhook, in Unix seconds (the
	// account webhooks carry it: phone_number_quality_update,
	// message_template_status_update).
	Time    json.RawMessage   `json:"time"`
	ID      json.RawMessage   `json:"id"` // the WhatsApp Business Account's id
	Changes []json.RawMessage `json:"changes"`
}

// metaChange is one changes[] of an entry: its value is read by its field.
type metaChange struct {
	Field string          `json:"field"`
	Value json.RawMessage `json:"value"`
}

// metaMessages is a "messages" or "user_preferences" change's value, its
// entries still raw: each is read on its own.
type metaMessages struct {
	Statuses    []json.RawMessage `json:"statuses"`
	Preferences []json.RawMessage `json:"user_preferences"`
}

// whatsapp serves Meta's webhook: the subscription handshake (GET) and the
// notifications (POST).
func (s *server) whatsapp(w http.ResponseWriter, r *http.Request) {
	hook := s.cfg.WhatsApp
	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		if q.Get("hub.mode") != "subscribe" || hook.VerifyToken == "" ||
			!hmac.Equal([]byte(q.Get("hub.verify_token")), []byte(hook.VerifyToken)) {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		// Meta's challenge is a number; echoed as one, nothing else a
		// caller sends is ever written back.
		challenge, err := strconv.ParseUint(q.Get("hub.challenge"), 10, 64)
		if err != nil {
			http.Error(w, "hub.challenge must be a number", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, strconv.FormatUint(challenge, 10))
	case http.MethodPost:
		s.whatsappNotification(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// whatsappNotification checks a POST's signature and applies its
// statuses. What Meta is told:
//
//	413  a body over MaxWhatsAppBody (never Meta's)
//	401  no X-Hub-Signature-256; 403 a wrong one: nothing changed
//	200  a signed body, applied; also a signed body that is not JSON, and
//	     a body with entries the scheduler cannot use (a field of the
//	     wrong type, a NUL, a status other than sent, delivered, read or
//	     failed, a timestamp no clock can mean, a verdict not in Meta's
//	     shape): each is logged and skipped, without a value, and the
//	     others are applied, since Meta would resend the body for days
//	     and it would never apply better (one entry, one verdict)
//	503  the database could not take a usable entry: Meta resends, and
//	     what was applied applies once
func (s *server) whatsappNotification(w http.ResponseWriter, r *http.Request) {
	log := s.cfg.Logger.With().Str("path", WhatsAppWebhookPath).Logger()
	b, ok := s.readMetaBody(w, r, log)
	if !ok {
		return
	}
	t := &metaTally{log: log}
	for i, rawEntry := range b.Entry {
		if err := s.applyMetaEntry(r.Context(), t, i, rawEntry); err != nil {
			ev := log.Error()
			if err.field != "" {
				ev = ev.Str("field", err.field)
			}
			ev.Str("error", err.err.Error()).Msg(err.msg)
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
	}
	total := metaSkipped.Add(int64(t.skipped))
	ev := log.Debug()
	if t.skipped > 0 {
		ev = log.Warn()
	}
	ev.Int("statuses", t.applied).Int("ours", t.ours).Int("consent_changes", t.consent).Int("verdicts", t.verdicts).
		Int("skipped", t.skipped).Int64("skipped_total", total).Msg("whatsapp webhook applied")
	w.WriteHeader(http.StatusOK)
}

// readMetaBody reads a notification's body, signed with the app secret,
// and answers the request itself (ok false) when it is too large, not
// signed, signed wrong, or not Meta's JSON (acknowledged: Meta would send
// it again forever).
func (s *server) readMetaBody(w http.ResponseWriter, r *http.Request, log zerolog.Logger) (b metaBody, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWhatsAppBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			log.Warn().Int64("limit", tooLarge.Limit).Msg("whatsapp webhook: body too large; refused")
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return b, false
		}
		http.Error(w, "bad request", http.StatusBadRequest)
		return b, false
	}
	sig := r.Header.Get("X-Hub-Signature-256")
	if sig == "" {
		log.Warn().Msg("whatsapp webhook: no X-Hub-Signature-256; refused")
		http.Error(w, "missing signature", http.StatusUnauthorized)
		return b, false
	}
	if !validMetaSignature(s.cfg.WhatsApp.AppSecret, body, sig) {
		log.Warn().Msg("whatsapp webhook: wrong X-Hub-Signature-256; refused")
		http.Error(w, "bad signature", http.StatusForbidden)
		return b, false
	}
	if err := json.Unmarshal(body, &b); err != nil {
		log.Warn().Int("bytes", len(body)).Msg("whatsapp webhook: a signed body that is not Meta's JSON; acknowledged, nothing applied")
		w.WriteHeader(http.StatusOK)
		return b, false
	}
	return b, true
}

// metaTally counts what a notification applied and skipped.
type metaTally struct {
	log                                       zerolog.Logger
	applied, ours, skipped, consent, verdicts int
}

// skip logs and counts one part of the body the scheduler cannot use:
// where it is and why, never a value of it.
func (t *metaTally) skip(field, where string, why error, status string) {
	t.skipped++
	ev := t.log.Warn().Str("field", field).Str("entry", where).Str("reason", why.Error())
	if metaWord.MatchString(status) {
		ev = ev.Str("status", status)
	}
	ev.Msg("whatsapp webhook: an entry the scheduler cannot use; skipped")
}

// metaDBError is a usable part of a notification the database could not
// take: the notification is answered 503 and Meta resends it.
type metaDBError struct {
	field, msg string
	err        error
}

// applyMetaEntry applies one entry of a notification, change by change.
func (s *server) applyMetaEntry(ctx context.Context, t *metaTally, i int, rawEntry json.RawMessage) *metaDBError {
	var e metaEntry
	if err := json.Unmarshal(rawEntry, &e); err != nil {
		t.skip("", fmt.Sprintf("entry[%d]", i), unusable("the entry is not in Meta's shape"), "")
		return nil
	}
	for j, rawChange := range e.Changes {
		where := fmt.Sprintf("entry[%d].changes[%d]", i, j)
		var c metaChange
		if err := json.Unmarshal(rawChange, &c); err != nil {
			t.skip("", where, unusable("the change is not in Meta's shape"), "")
			continue
		}
		if err := s.applyMetaChange(ctx, t, e, c, where); err != nil {
			return err
		}
	}
	return nil
}

// applyMetaChange applies one change of an entry, by its field: a
// verdict, a template's category, receipts, preferences; any other field
// is not the scheduler's.
func (s *server) applyMetaChange(ctx context.Context, t *metaTally, e metaEntry, c metaChange, where string) *metaDBError {
	var n int
	var err error
	var failed string
	switch c.Field {
	case "phone_number_quality_update", "business_capability_update", "message_template_status_update":
		n, err = s.applyMetaVerdict(ctx, c.Field, e.Time, c.Value)
		failed = "whatsapp webhook: recording Meta's verdict failed; Meta will resend"
	case "template_category_update":
		n, err = s.applyTemplateCategory(ctx, e.ID, e.Time, c.Value)
		failed = "whatsapp webhook: recording a template's category failed; Meta will resend"
	case "messages", "user_preferences":
		var v metaMessages
		if err := json.Unmarshal(c.Value, &v); err != nil {
			t.skip(c.Field, where, unusable("the value is not in Meta's shape"), "")
			return nil
		}
		if c.Field == "user_preferences" {
			return s.applyMetaPreferences(ctx, t, c.Field, where, v)
		}
		return s.applyMetaStatuses(ctx, t, c.Field, where, v)
	default:
		return nil
	}
	switch {
	case errors.Is(err, errUnusableVerdict):
		t.skip(c.Field, where, err, "")
	case err != nil:
		return &metaDBError{field: c.Field, msg: failed, err: err}
	default:
		t.verdicts += n
	}
	return nil
}

// eachMeta decodes each of a change's items (raws, its value's list
// named list), skips and counts those the scheduler cannot use (status
// names an item's status in the log, when it has one), and applies the
// others with apply, which stops at a database failure.
func eachMeta[T any](t *metaTally, field, where, list string, raws []json.RawMessage,
	decode func(json.RawMessage) (T, error), status func(T) string, apply func(item T, where string) *metaDBError,
) *metaDBError {
	for k, raw := range raws {
		at := fmt.Sprintf("%s.value.%s[%d]", where, list, k)
		item, err := decode(raw)
		if err != nil {
			t.skip(field, at, err, status(item))
			continue
		}
		if err := apply(item, at); err != nil {
			return err
		}
	}
	return nil
}

// applyMetaPreferences applies a change's user preferences (marketing
// messages stopped or resumed) as consent.
func (s *server) applyMetaPreferences(ctx context.Context, t *metaTally, field, where string, v metaMessages) *metaDBError {
	noStatus := func(metaPreference) string { return "" }
	return eachMeta(t, field, where, "user_preferences", v.Preferences, decodeMetaPreference, noStatus,
		func(p metaPreference, where string) *metaDBError {
			n, err := s.applyMetaPreference(ctx, p)
			switch {
			case errors.Is(err, activity.ErrInstantOutOfRange):
				t.skip(field, where, unusable("timestamp out of range"), "")
			case err != nil:
				return &metaDBError{msg: "whatsapp webhook: applying a preference failed; Meta will resend", err: err}
			default:
				t.consent += n
			}
			return nil
		})
}

// applyMetaStatuses applies a change's statuses as receipts.
func (s *server) applyMetaStatuses(ctx context.Context, t *metaTally, field, where string, v metaMessages) *metaDBError {
	status := func(st metaStatus) string { return st.Status }
	return eachMeta(t, field, where, "statuses", v.Statuses, decodeMetaStatus, status,
		func(st metaStatus, where string) *metaDBError {
			ok, err := s.applyMetaStatus(ctx, st)
			switch {
			case errors.Is(err, activity.ErrUnknownReceiptStatus):
				t.skip(field, where, unusable("status unknown to engagement_receipt"), st.Status)
			case errors.Is(err, activity.ErrInstantOutOfRange):
				t.skip(field, where, unusable("timestamp out of range"), st.Status)
			case err != nil:
				return &metaDBError{msg: "whatsapp webhook: applying a receipt failed; Meta will resend", err: err}
			default:
				t.applied++
				if ok {
					t.ours++
				}
			}
			return nil
		})
}

var errBadTimestamp = errors.New("timestamp is not Unix seconds")

// applyMetaStatus applies one status as a receipt, reporting whether the
// message was the scheduler's.
func (s *server) applyMetaStatus(ctx context.Context, st metaStatus) (bool, error) {
	o := activity.ReceiptOptions{At: st.At, ErrorCode: st.ErrorCode}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StatementTimeout)
	defer cancel()
	_, ours, err := activity.Receipt(ctx, s.cfg.Pool, st.ID, st.Status, o)
	if err != nil || !ours {
		return ours, err
	}
	// Meta's pricing, when the status carries it: the latest Meta says
	// (whatever the receipt changed), for what the message costs.
	if st.Billable != nil && st.Category != "" && len(st.Category) <= maxPricingCategory {
		if _, err := whatsappPricingQuery.Exec(ctx, s.cfg.Pool, whatsappPricingArgs{
			ProviderMessageID: st.ID, Billable: *st.Billable, Category: st.Category,
		}); err != nil {
			return ours, fmt.Errorf("store Meta's pricing: %w", err)
		}
	}
	return ours, nil
}

// applyMetaPreference opts the users with the entry's WhatsApp id out of
// re-engagement (value "stop") or back in ("resume"), from Meta's
// user_preferences; it returns how many users' consent it changed. Other
// categories and values, and ids no profile has, change nothing.
func (s *server) applyMetaPreference(ctx context.Context, p metaPreference) (int, error) {
	if p.Category != "marketing_messages" || (p.Value != "stop" && p.Value != "resume") || p.WaID == "" {
		return 0, nil
	}
	o := activity.ConsentOptions{At: p.At}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StatementTimeout)
	defer cancel()
	users, err := usersByJIDQuery.All(ctx, s.cfg.Pool, usersByJIDArgs{JID: p.WaID + "@s.whatsapp.net"})
	if err != nil {
		return 0, err
	}
	changed := 0
	for _, u := range users {
		f := activity.OptIn
		if p.Value == "stop" {
			f = activity.OptOut
		}
		ok, err := f(ctx, s.cfg.Pool, u.UserID, activity.SourceMetaPreferences, o)
		if err != nil {
			return changed, err
		}
		if ok {
			changed++
		}
	}
	return changed, nil
}

// maxPricingCategory bounds the category kept from Meta's pricing: Meta's
// are a word (marketing, utility, authentication, service, …); anything
// longer is not one and is not kept.
const maxPricingCategory = 64

// validMetaSignature reports whether header is "sha256=" and the hex
// HMAC-SHA256 of body under secret, compared in constant time.
func validMetaSignature(secret string, body []byte, header string) bool {
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}
