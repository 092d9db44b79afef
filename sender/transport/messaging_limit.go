package transport

import (
	"encoding/json"
	"strings"
)

// Meta's messaging limit, as the Graph API's Phone Number node tells it.
//
// Meta, "Messaging limits"
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/messaging-limits):
// "The messaging_limit_tier field ... has been deprecated. Request the
// whatsapp_business_manager_messaging_limit field instead." Since
// 2025-10-07 the limit is the business portfolio's, shared by all its
// numbers
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/upcoming-messaging-limits-changes).
// ReadHealth asks for the new field only: the deprecated one reports a
// number's own tier, which is no longer the limit Meta applies.
//
// Meta's page does not print the field's answer. Providers that proxy
// the Graph API show it as a tier word ({"whatsapp_business_manager_messaging_limit":
// "TIER_2K"}); Meta's business_capability_update webhook spells the same
// limit as an integer (250, 2000, 10000, 100000; -1 unlimited:
// https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/business_capability_update/).
// Both shapes are read, as a tier word. Anything else (another type, an
// unknown word or number, TIER_NOT_SET) names no limit: it is left empty,
// and the caller keeps the limit it knew, so that no answer raises a
// limit without naming one (issue 55).

// MessagingLimitField is the Phone Number node's field for the business
// portfolio's messaging limit.
const MessagingLimitField = "whatsapp_business_manager_messaging_limit"

// limitTiers are the business_capability_update webhook's integers, as
// the tier words TierLimit reads.
var limitTiers = map[int64]string{250: "TIER_250", 2000: "TIER_2K", 10000: "TIER_10K", 100000: "TIER_100K", -1: "TIER_UNLIMITED"}

// LimitTier reads a messaging limit in either of Meta's shapes (a tier
// word or the webhook's integer) as a tier word; ok is false for anything
// that names no limit.
func LimitTier(raw json.RawMessage) (tier string, ok bool) {
	var word string
	if json.Unmarshal(raw, &word) == nil {
		_, ok = TierLimit(word)
		return word, ok
	}
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		tier, ok = limitTiers[n]
		return tier, ok
	}
	return "", false
}

// messagingLimit reads the portfolio's messaging limit from a Phone Number
// node's fields: its tier word, or "" and the problem.
func messagingLimit(fields map[string]json.RawMessage) (tier, problem string) {
	raw, ok := fields[MessagingLimitField]
	if !ok || strings.TrimSpace(string(raw)) == "null" {
		return "", MessagingLimitField + " missing"
	}
	if tier, ok = LimitTier(raw); !ok {
		return "", MessagingLimitField + " not one of Meta's limits"
	}
	return tier, ""
}
