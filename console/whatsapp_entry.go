package console

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
)

// One entry, one verdict (../shared/CONTRACT.md, round seven): each
// statuses[] and user_preferences[] entry of Meta's webhook body is read on
// its own, field by field, against the shape Meta documents, so that one the
// scheduler cannot use (a field of the wrong type, a NUL, an unknown
// status) is skipped, logged and counted, and the entries beside it still
// apply. Before, the whole change was one Go struct: one mistyped field
// dropped every status of the change, and a NUL (which a JSON string may
// carry as \u0000 and PostgreSQL's text refuses) failed the statement and
// answered 503 on every retry of the body.
//
// Only the fields the scheduler reads are checked; the rest (recipient_id,
// conversation, biz_opaque_callback_data, …) may be anything. A reason
// never quotes a value: ids (a wamid encodes the recipient's number),
// wa_ids and texts are personal data.

// metaSkipped counts the entries (and changes, and verdicts) the webhook
// skipped since the process started: the log's skipped_total.
var metaSkipped atomic.Int64

// unusable is why an entry cannot be used, in words that quote no value.
type unusable string

func (u unusable) Error() string { return string(u) }

// maxProviderID bounds a status's id: a wamid is about 60 characters; an id
// far longer is no message of the scheduler's and is not kept.
const maxProviderID = 512

// metaWord is a status or value as Meta spells them (lower-case words):
// the only values a log line may show.
var metaWord = regexp.MustCompile(`^[a-z][a-z_]{0,31}$`)

// metaStatus is one statuses[] entry as the scheduler reads it
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/status/):
// id and status strings, timestamp Unix seconds as a string, errors[0].code
// an integer, pricing.billable a boolean and pricing.category a string.
type metaStatus struct {
	ID        string
	Status    string
	At        time.Time // zero: no timestamp (the database's clock)
	ErrorCode string    // "" for none
	// Billable and Category are Meta's pricing, when the status carries
	// both (since July 2025, per delivered template; absent on failed
	// statuses and in older API versions).
	Billable *bool
	Category string
}

// decodeMetaStatus reads one statuses[] entry, or says why it cannot be
// used.
func decodeMetaStatus(raw json.RawMessage) (metaStatus, error) {
	var st metaStatus
	f, err := metaObject(raw, "the entry")
	if err != nil {
		return st, err
	}
	if st.ID, err = f.text("id", true); err != nil {
		return st, err
	}
	if len(st.ID) > maxProviderID {
		return st, unusable("id longer than " + strconv.Itoa(maxProviderID) + " bytes")
	}
	if st.Status, err = f.text("status", true); err != nil {
		return st, err
	}
	switch st.Status {
	case activity.ReceiptSent, activity.ReceiptDelivered, activity.ReceiptRead, activity.ReceiptFailed:
	default:
		return st, unusable("status is not sent, delivered, read or failed")
	}
	if st.At, err = f.unix("timestamp"); err != nil {
		return st, err
	}
	if raw, ok := f.present("errors"); ok {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return st, unusable("errors is not a list")
		}
		if len(list) > 0 {
			e, err := metaObject(list[0], "errors[0]")
			if err != nil {
				return st, err
			}
			if raw, ok := e.present("code"); ok {
				code, ok := metaInteger(raw)
				if !ok {
					return st, unusable("errors[0].code is not an integer")
				}
				st.ErrorCode = code
			}
		}
	}
	if raw, ok := f.present("pricing"); ok {
		p, err := metaObject(raw, "pricing")
		if err != nil {
			return st, err
		}
		if raw, ok := p.present("billable"); ok {
			var b bool
			if json.Unmarshal(raw, &b) != nil {
				return st, unusable("pricing.billable is not a boolean")
			}
			st.Billable = &b
		}
		if st.Category, err = p.text("category", false); err != nil {
			return st, unusable("pricing." + err.Error())
		}
	}
	return st, nil
}

// metaPreference is one user_preferences[] entry as the scheduler reads
// it: a user stopped or resumed marketing messages with WhatsApp's own
// control
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/user_preferences:
// wa_id, category and value strings, timestamp Unix seconds as a number).
// WaID is the user's number: it must not reach a log.
type metaPreference struct {
	WaID     string
	Category string
	Value    string
	At       time.Time // zero: no timestamp
}

// decodeMetaPreference reads one user_preferences[] entry, or says why it
// cannot be used. A category other than marketing_messages is read (and
// then changes nothing); a marketing_messages value other than stop or
// resume cannot be used.
func decodeMetaPreference(raw json.RawMessage) (metaPreference, error) {
	var p metaPreference
	f, err := metaObject(raw, "the entry")
	if err != nil {
		return p, err
	}
	if p.WaID, err = f.text("wa_id", true); err != nil {
		return p, err
	}
	if p.Category, err = f.text("category", true); err != nil {
		return p, err
	}
	if p.Value, err = f.text("value", true); err != nil {
		return p, err
	}
	if p.Category == "marketing_messages" && p.Value != "stop" && p.Value != "resume" {
		return p, unusable("value is not stop or resume")
	}
	if p.At, err = f.unix("timestamp"); err != nil {
		return p, err
	}
	return p, nil
}

// metaFields is a JSON object's members, null ones left out (a null is an
// absent field).
type metaFields map[string]json.RawMessage

// metaObject reads raw as a JSON object; what names it in the reason.
func metaObject(raw json.RawMessage, what string) (metaFields, error) {
	var f metaFields
	if json.Unmarshal(raw, &f) != nil || f == nil {
		return nil, unusable(what + " is not a JSON object")
	}
	for k, v := range f {
		if string(bytes.TrimSpace(v)) == "null" {
			delete(f, k)
		}
	}
	return f, nil
}

func (f metaFields) present(key string) (json.RawMessage, bool) {
	raw, ok := f[key]
	return raw, ok
}

// text reads key as a JSON string without a NUL; required says an absent
// or empty one cannot be used.
func (f metaFields) text(key string, required bool) (string, error) {
	raw, ok := f[key]
	if !ok {
		if required {
			return "", unusable(key + " is missing")
		}
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", unusable(key + " is not a string")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", unusable(key + " carries a NUL")
	}
	if required && s == "" {
		return "", unusable(key + " is empty")
	}
	return s, nil
}

// unix reads key as Unix seconds, a JSON integer or a string of digits
// (Meta sends a status's as a string, a preference's as a number); zero
// when absent.
func (f metaFields) unix(key string) (time.Time, error) {
	raw, ok := f[key]
	if !ok {
		return time.Time{}, nil
	}
	digits, ok := metaInteger(raw)
	if !ok {
		return time.Time{}, unusable(key + " is not Unix seconds")
	}
	sec, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || sec <= 0 || sec > 1<<40 {
		return time.Time{}, unusable(key + " is not Unix seconds")
	}
	return time.Unix(sec, 0), nil
}

// metaInteger reads raw as a non-negative integer, a JSON number or a
// string of digits, and returns its digits.
func metaInteger(raw json.RawMessage) (string, bool) {
	text := string(bytes.TrimSpace(raw))
	var s string
	if json.Unmarshal(raw, &s) == nil {
		text = s
	}
	if text == "" || len(text) > 19 {
		return "", false
	}
	for _, r := range text {
		if r < '0' || r > '9' {
			return "", false
		}
	}
	return text, true
}
