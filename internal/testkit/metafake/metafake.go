// Package metafake makes what Meta's WhatsApp webhooks send, for the tests
// of the console's /webhooks/whatsapp: bodies in the shape of Meta's
// webhook references (status messages, user_preferences) and their
// X-Hub-Signature-256 under an app secret, as Meta computes it.
//
// https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/status/
// https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/user_preferences
package metafake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Sign is body's X-Hub-Signature-256 under secret: "sha256=" and the hex
// HMAC-SHA256 of the raw body.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Status is one statuses[] entry: the message's provider id, its status
// (sent, delivered, read, failed, or anything Meta might send), when, and
// a failure's error code ("" for none). It carries the recipient's number
// and Meta's pricing (billable, marketing), as Meta's do.
func Status(id, status string, at time.Time, code string) string {
	return PricedStatus(id, status, "5511999990000", at, code, Pricing{Billable: true, Category: "marketing", Type: "regular"})
}

// Pricing is a status's pricing object as Meta's status messages webhook
// reference
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/status/,
// updated 2026-05-21) spells it: billable, pricing_model (PMP, per-message
// pricing, since 2025-07-01), type (regular; free_customer_service, a
// message Meta does not charge for inside an open customer service
// window; free_entry_point) and category (marketing, utility,
// authentication, service, ...). Meta includes it "only ... with sent
// status, and one of either delivered or read status".
type Pricing struct {
	Billable       bool
	Category, Type string
}

// PricedStatus is Status to the recipient's number with Meta's pricing p.
func PricedStatus(id, status, recipient string, at time.Time, code string, p Pricing) string {
	s := fmt.Sprintf(`{"id":%q,"status":%q,"timestamp":"%d","recipient_id":%q,
		"pricing":{"billable":%t,"pricing_model":"PMP","category":%q,"type":%q}`, id, status, at.Unix(), recipient,
		p.Billable, p.Category, p.Type)
	if code != "" {
		s += `,"errors":[{"code":` + code + `,"title":"Message undeliverable","message":"Message undeliverable","error_data":{"details":"Message Undeliverable."}}]`
	}
	return s + "}"
}

// Statuses is a status webhook body carrying the entries (Status's).
func Statuses(entries ...string) []byte {
	return []byte(`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{
		"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},
		"statuses":[` + strings.Join(entries, ",") + `]},"field":"messages"}]}]}`)
}

// Preference is a user_preferences webhook body: the user with waID (their
// number) stopped ("stop") or resumed ("resume") marketing messages at at.
func Preference(waID, value string, at time.Time) []byte {
	return Preferences(waID, PreferenceEntry(waID, value, at))
}

// PreferenceEntry is one user_preferences[] entry, in the shape of Meta's
// reference
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/user_preferences):
// wa_id, detail, category marketing_messages, value, timestamp (Unix
// seconds, a number).
func PreferenceEntry(waID, value string, at time.Time) string {
	return fmt.Sprintf(`{"wa_id":%q,"detail":"User requested to stop marketing messages","category":"marketing_messages",
		"value":%q,"timestamp":%d}`, waID, value, at.Unix())
}

// Preferences is a user_preferences webhook body carrying the entries
// (PreferenceEntry's), the contact's wa_id being contact's.
func Preferences(contact string, entries ...string) []byte {
	return []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{
		"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},
		"contacts":[{"profile":{"name":"Maria"},"wa_id":%q}],
		"user_preferences":[%s]},"field":"user_preferences"}]}]}`, contact, strings.Join(entries, ",")))
}
