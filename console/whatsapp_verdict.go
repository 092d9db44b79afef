package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Meta's verdict on the number and its templates, from the WhatsApp
// Business Account webhooks (issue 46). What they write is what the next
// queue-process run on the Cloud API reads (delivery/verdict.go):
//
//   - phone_number_quality_update
//     (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/phone_number_quality_update/):
//     value.event (ONBOARDING, THROUGHPUT_UPGRADE; and in the reference's
//     earlier versions UPGRADE, DOWNGRADE, FLAGGED, UNFLAGGED),
//     value.max_daily_conversations_per_business (the business
//     portfolio's messaging limit, TIER_50 … TIER_UNLIMITED, TIER_NOT_SET)
//     and value.current_limit (the same, which Meta says it removes in
//     February 2026). The tier becomes the number's messaging_limit_tier
//     (the portfolio's, preferred, else current_limit; TIER_NOT_SET, a
//     tier of the wrong type or an unknown one keeps the tier known
//     before, so that no webhook raises the limit without naming one);
//     FLAGGED sets the number flagged (marketing waits) and UNFLAGGED
//     clears it. The webhook carries no quality rating: the rating stays
//     what the Graph API last said.
//   - business_capability_update
//     (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/business_capability_update/):
//     value.max_daily_conversations_per_business, the business
//     portfolio's messaging limit as an integer (250, 2000, 10000,
//     100000; -1 unlimited), becomes the number's messaging_limit_tier as
//     its tier word (issue 57); a value of another type or a number Meta
//     does not list keeps the tier known before.
//   - message_template_status_update
//     (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/message_template_status_update/):
//     value.event (APPROVED, PAUSED, DISABLED, REINSTATED, REJECTED,
//     FLAGGED, PENDING_DELETION, …) for value.message_template_name. PAUSED
//     and DISABLED hold the template's messages (template_paused); APPROVED
//     (a paused template is unpaused as APPROVED) and REINSTATED release
//     them; any other event is recorded, but does not release a template
//     held (a FLAGGED or IN_APPEAL for a disabled template leaves it
//     disabled).
//
// Both apply in the order Meta triggered them (entry.time): a webhook
// older than what is recorded changes nothing (Meta resends and reorders).
// A time in the future counts as now. Every value is checked against the
// shape Meta documents; one that does not fit is skipped with a warning
// and acknowledged (Meta would resend it for days).

// errUnusableVerdict is a verdict webhook whose value the scheduler cannot
// use: skipped, acknowledged.
var errUnusableVerdict = errors.New("not a verdict the scheduler can use")

// metaEvent is how Meta spells an event: upper-case words joined by
// underscores. Anything else is not stored.
var metaEvent = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// metaTemplateName is how Meta names a template: lower-case letters,
// digits and underscores, at most 512 characters.
var metaTemplateName = regexp.MustCompile(`^[a-z0-9_]{1,512}$`)

// applyMetaVerdict records one phone_number_quality_update,
// business_capability_update or message_template_status_update change; it
// returns 1 when it changed what is recorded, 0 when it was older than
// that. A release (APPROVED,
// REINSTATED, UNFLAGGED) makes the messages it held due now.
func (s *server) applyMetaVerdict(ctx context.Context, field string, entryTime, value json.RawMessage) (int, error) {
	v, at, err := metaValue(entryTime, value)
	if err != nil {
		return 0, err
	}
	event, _ := metaString(v, "event")
	if event != "" && !metaEvent.MatchString(event) {
		return 0, fmt.Errorf("%w: the event is not one of Meta's", errUnusableVerdict)
	}
	// One of the two statements, by field: record runs it once the
	// statement timeout is set.
	var record func(ctx context.Context) (changed bool, released int64, err error)
	var template string
	var tier *string
	if field == "message_template_status_update" {
		template, _ = metaString(v, "message_template_name")
		if event == "" || !metaTemplateName.MatchString(template) {
			return 0, fmt.Errorf("%w: no event, or no template name in Meta's form", errUnusableVerdict)
		}
		record = func(ctx context.Context) (bool, int64, error) {
			row, err := whatsappTemplateStatusQuery.One(ctx, s.cfg.Pool,
				whatsappTemplateStatusArgs{TemplateName: template, Event: event, At: at})
			return row.Changed, row.Released, err
		}
	} else if record, tier, err = s.numberVerdict(field, v, event, at); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StatementTimeout)
	defer cancel()
	changed, released, err := record(ctx)
	if err != nil {
		return 0, fmt.Errorf("record Meta's %s: %w", field, err)
	}
	if !changed {
		return 0, nil
	}
	ev := s.cfg.Logger.Info().Str("field", field).Str("event", event).Int64("released", released)
	if template != "" {
		ev = ev.Str("template", template)
	}
	if tier != nil {
		ev = ev.Str("messaging_limit_tier", *tier)
	}
	ev.Msg("whatsapp webhook: Meta's verdict recorded")
	return 1, nil
}

// numberVerdict is applyMetaVerdict's statement for a verdict on the
// number or the portfolio (its messaging limit tier, a flag), and the
// tier.
func (s *server) numberVerdict(field string, v map[string]json.RawMessage, event string, at *time.Time) (
	func(ctx context.Context) (bool, int64, error), *string, error,
) {
	tier := portfolioLimit(field, v)
	var flagged *bool
	switch event {
	case "FLAGGED":
		flagged = new(bool)
		*flagged = true
	case "UNFLAGGED":
		flagged = new(bool)
	}
	if tier == nil && flagged == nil {
		return nil, nil, fmt.Errorf("%w: neither a messaging limit tier nor a flag", errUnusableVerdict)
	}
	return func(ctx context.Context) (bool, int64, error) {
		row, err := whatsappNumberHealthQuery.One(ctx, s.cfg.Pool, whatsappNumberHealthArgs{
			Transport: transport.WhatsAppName, MessagingLimitTier: tier, Flagged: flagged, At: at})
		return row.Changed, row.Released, err
	}, tier, nil
}

// portfolioLimit is the business portfolio's messaging limit a value of
// field names, as a tier word, each in the shape its reference documents:
// phone_number_quality_update's max_daily_conversations_per_business,
// else current_limit, strings (TIER_250 …);
// business_capability_update's max_daily_conversations_per_business, an
// integer (250, 2000, 10000, 100000; -1 unlimited:
// https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/business_capability_update/).
// nil when it names none.
func portfolioLimit(field string, v map[string]json.RawMessage) *string {
	if field == "business_capability_update" {
		var n int64
		raw := v["max_daily_conversations_per_business"]
		if json.Unmarshal(raw, &n) != nil {
			return nil
		}
		if t, ok := transport.LimitTier(raw); ok {
			return &t
		}
		return nil
	}
	for _, f := range []string{"max_daily_conversations_per_business", "current_limit"} {
		if t, ok := metaString(v, f); ok && validTier(t) {
			return &t
		}
	}
	return nil
}

// validTier reports whether t is one of Meta's messaging limit tiers that
// names a limit. TIER_NOT_SET names none: recorded, it would replace the
// known tier and --daily-limit auto would fall back to its 250, above
// TIER_50's 50; it keeps the known tier instead, as a tier of the wrong
// type or one Meta never named does (issue 55).
func validTier(t string) bool {
	_, ok := transport.TierLimit(t)
	return ok
}

// metaValue reads an account webhook change: its value, which must be a
// JSON object, and its entry's time (metaTime).
func metaValue(entryTime, value json.RawMessage) (map[string]json.RawMessage, *time.Time, error) {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(value, &v); err != nil || v == nil {
		return nil, nil, fmt.Errorf("%w: the value is not a JSON object", errUnusableVerdict)
	}
	at, err := metaTime(entryTime)
	return v, at, err
}

// metaString is v[key] when it is a JSON string.
func metaString(v map[string]json.RawMessage, key string) (string, bool) {
	var s string
	raw, ok := v[key]
	if !ok || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// metaTime reads entry.time, Unix seconds as a number (or a string of
// digits); nil when absent (then the database's clock counts).
func metaTime(raw json.RawMessage) (*time.Time, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	text := string(bytes.Trim(raw, `"`))
	sec, err := strconv.ParseInt(text, 10, 64)
	if err != nil || sec <= 0 || sec > 1<<40 {
		return nil, fmt.Errorf("%w: %w", errUnusableVerdict, errBadTimestamp)
	}
	t := time.Unix(sec, 0)
	return &t, nil
}
