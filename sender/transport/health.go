package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Health is Meta's verdict on a Cloud API number, as the Graph API's Phone
// Number node reports it (GET /{phone-number-id}?fields=quality_rating,
// whatsapp_business_manager_messaging_limit,status; messaging_limit.go):
// https://developers.facebook.com/docs/graph-api/reference/whats-app-business-account-to-number-current-status/
// An empty field (a nil Flagged) is one the answer did not carry in the
// documented type and words: the caller keeps what it knew, so that a
// lying answer can never clear a flag or raise a limit (issue 55).
type Health struct {
	// QualityRating is GREEN, YELLOW, RED or UNKNOWN.
	QualityRating string
	// MessagingLimitTier is the business portfolio's messaging limit
	// (whatsapp_business_manager_messaging_limit, messaging_limit.go) as a
	// tier word: TIER_250, TIER_2K, TIER_10K, TIER_100K, TIER_UNLIMITED (or
	// TIER_50, TIER_1K). Empty when the answer named no limit: the tier
	// known before stays.
	MessagingLimitTier string
	// Flagged: the number's status is FLAGGED (its quality is at risk);
	// false for any other status Meta documents (CONNECTED, …); nil when
	// the status is missing, null, not a string, UNKNOWN or no word Meta
	// documents: the flag known before stays.
	Flagged *bool
	// Problems names what was missing or of the wrong type.
	Problems []string
}

// HealthReader is a transport that can read its number's health: the
// Cloud API's.
type HealthReader interface {
	ReadHealth(ctx context.Context) (Health, error)
	// TemplateKeys maps each template name to the message keys sent with it.
	TemplateKeys() map[string][]string
}

// healthTimeout bounds a health read: a slow answer is no answer.
const healthTimeout = 5 * time.Second

var qualityRatings = []string{"GREEN", "YELLOW", "RED", "UNKNOWN"}

// numberStatuses are the Phone Number node's statuses that say whether the
// number is flagged: FLAGGED, and the others Meta documents for the field
// (https://developers.facebook.com/docs/graph-api/reference/whats-app-business-account-to-number-current-status/).
// UNKNOWN, and a word not listed here, says nothing: the flag stays.
var numberStatuses = []string{"CONNECTED", "FLAGGED", "PENDING", "DELETED", "MIGRATED", "BANNED",
	"RESTRICTED", "RATE_LIMITED", "DISCONNECTED", "UNVERIFIED"}

// ReadHealth asks the Graph API for the number's quality rating, its
// portfolio's messaging limit and its status. An answer that is not a JSON object, a status
// other than 200, or no answer within 5 s is an error; a field missing or
// of another type is left empty and named in Problems.
func (w *WhatsApp) ReadHealth(ctx context.Context) (Health, error) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	url := strings.TrimSuffix(w.endpoint, "/messages") + "?fields=quality_rating," + MessagingLimitField + ",status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Health{}, fmt.Errorf("whatsapp health: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := w.http.client.Do(req)
	if err != nil {
		return Health{}, fmt.Errorf("whatsapp health: %w", scrubURL(err))
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Health{}, fmt.Errorf("whatsapp health: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Health{}, fmt.Errorf("whatsapp health: the Graph API answered %d", resp.StatusCode)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return Health{}, errors.New("whatsapp health: the Graph API's answer is not a JSON object")
	}
	var h Health
	// text is the field name when it is a JSON string valid says is one
	// of Meta's words, else "" (named in Problems).
	text := func(name string, valid func(string) bool) string {
		var s string
		raw, ok := fields[name]
		switch {
		case !ok || strings.TrimSpace(string(raw)) == "null":
			h.Problems = append(h.Problems, name+" missing")
		case json.Unmarshal(raw, &s) != nil || !valid(s):
			h.Problems = append(h.Problems, name+" not one of Meta's values")
			s = ""
		}
		return s
	}
	h.QualityRating = text("quality_rating", func(s string) bool { return contains(qualityRatings, s) })
	if tier, problem := messagingLimit(fields); problem != "" {
		h.Problems = append(h.Problems, problem)
	} else {
		h.MessagingLimitTier = tier
	}
	if status := text("status", func(s string) bool { return contains(numberStatuses, s) }); status != "" {
		flagged := status == "FLAGGED"
		h.Flagged = &flagged
	}
	return h, nil
}

// TemplateKeys maps each template name to the message keys sent with it.
func (w *WhatsApp) TemplateKeys() map[string][]string {
	out := map[string][]string{}
	for key, t := range w.templates {
		out[t.Name] = append(out[t.Name], key)
	}
	return out
}

// TierLimit is the number of unique users a day a messaging limit tier
// allows (Meta's messaging limits: TIER_250 … TIER_100K; TIER_UNLIMITED
// counts as 100,000 here, the highest finite tier, so the budget stays a
// budget).
func TierLimit(tier string) (int, bool) {
	n, ok := map[string]int{
		"TIER_50": 50, "TIER_250": 250, "TIER_1K": 1000, "TIER_2K": 2000, "TIER_10K": 10000,
		"TIER_100K": 100000, "TIER_UNLIMITED": 100000,
	}[tier]
	return n, ok
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// scrubURL drops the request's URL from a client error (it names the
// phone number id; the token is in a header, never in it).
func scrubURL(err error) error {
	var uerr interface{ Unwrap() error }
	if errors.As(err, &uerr) {
		if inner := uerr.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}
