package sender

import (
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// The bounds Message.Validate holds a message to (docs/operations.md,
// "Enqueue", and the API's schema, console/openapi.json).
const (
	// MaxTypeLen is the longest message type: lowercase ASCII letters,
	// digits, "_", "." and "-", starting with a letter (goodbye,
	// weekly_review, support_followup, custom_news).
	MaxTypeLen = 64
	// MaxCatalogKeyLen is the longest catalog key: ASCII letters, digits,
	// "_", "." and "-" (engagement.weekly_review.celebration).
	MaxCatalogKeyLen = 128
	// MaxParams is how many params a message may carry.
	MaxParams = 32
	// MaxParamNameLen is the longest param name: ASCII letters, digits
	// and "_", what a catalog template's {name} can name.
	MaxParamNameLen = 64
	// MaxParamValueLen is the longest param value, in characters: a
	// WhatsApp template's body is at most 1,024 characters.
	MaxParamValueLen = 1024
	// ScheduleAhead is how far ahead of now a message may be scheduled (or
	// its period start or end): a year and a month, so a yearly message
	// queued a year out, and its period's end, fit.
	ScheduleAhead = 400 * 24 * time.Hour
)

// EarliestInstant is the earliest scheduled_for, period_start or
// replay_until a message may carry: nothing the scheduler sends is older,
// and 0001-01-01 (Go's zero time, which would mean "none") is a mistake.
var EarliestInstant = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	typeRE       = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)
	catalogKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	paramNameRE  = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	// The JIDs a message may go to, as Baileys writes them
	// (WhiskeySockets/Baileys, src/WABinary/jid-utils.ts: jidEncode is
	// user[_agent][:device]@server; isJidUser, isLidUser, isJidGroup):
	// a phone number's (E.164 without "+": at most 15 digits, no leading
	// 0), a LID (WhatsApp's hidden-number id), a group (its id, or the
	// legacy creator-timestamp form). No device or agent suffix (that
	// names one device of the user, not the user), no @c.us (the legacy
	// form, which Baileys normalizes to @s.whatsapp.net), @broadcast,
	// @newsletter, @call or @bot.
	phoneJIDRE = regexp.MustCompile(`^[1-9][0-9]{5,14}@s\.whatsapp\.net$`)
	lidJIDRE   = regexp.MustCompile(`^[1-9][0-9]{0,19}@lid$`)
	groupJIDRE = regexp.MustCompile(`^[0-9]{1,32}(-[0-9]{1,20})?@g\.us$`)
)

// Validate checks a message before anything is written (Enqueue calls it
// first; Request.Message too, so engagementctl enqueue and POST
// /api/messages refuse the same messages, exit 2 and 400). It returns the
// first problem as a *FieldError (wrapping ErrInvalidRequest) naming the
// request's field:
//
//   - user_id: a UUID;
//   - type: 1 to MaxTypeLen lowercase ASCII letters, digits, "_", "." or
//     "-", starting with a letter;
//   - key: empty (the type's own text), or 1 to MaxCatalogKeyLen ASCII
//     letters, digits, "_", "." or "-", starting with a letter or digit;
//   - params: at most MaxParams, each name 1 to MaxParamNameLen ASCII
//     letters, digits or "_", each value valid UTF-8 without NUL, at most
//     MaxParamValueLen characters;
//   - destination: empty, individual or group;
//   - jid: empty (the profile's routing), or one Baileys accepts:
//     <phone>@s.whatsapp.net, <lid>@lid (individual) or <id>@g.us
//     (group), agreeing with destination when that is given;
//   - scheduled_for, period_start, replay_until: zero (none), or from
//     EarliestInstant to ScheduleAhead after now (the wall clock).
//
// An error quotes what it was given only when it cannot be a phone number,
// a params value or a key's text (never the JID).
func (m Message) Validate() error {
	if _, ok := postgres.ParseUUID(m.UserID); !ok {
		return fieldErrorf("user_id", "%q is not a UUID", truncateRunes(m.UserID, 60))
	}
	switch {
	case m.Type == "":
		return fieldErrorf("type", "is required (e.g. goodbye, weekly_review, reminder)")
	case len(m.Type) > MaxTypeLen:
		return fieldErrorf("type", "is %d characters long, at most %d", utf8.RuneCountInString(m.Type), MaxTypeLen)
	case !typeRE.MatchString(m.Type):
		return fieldErrorf("type", "%q: lowercase letters, digits, _ . and -, starting with a letter (like support_followup)",
			truncateRunes(m.Type, 40))
	}
	switch {
	case m.Key == "":
	case len(m.Key) > MaxCatalogKeyLen:
		return fieldErrorf("key", "is %d characters long, at most %d", utf8.RuneCountInString(m.Key), MaxCatalogKeyLen)
	case !catalogKeyRE.MatchString(m.Key):
		return fieldErrorf("key", "%q: letters, digits, _ . and - (like engagement.weekly_review.celebration)", truncateRunes(m.Key, 40))
	}
	if err := validateParams(m.Params); err != nil {
		return err
	}
	if err := validateDestination(m.Destination, m.DestinationJID); err != nil {
		return err
	}
	now := time.Now()
	for _, f := range []struct {
		field string
		t     time.Time
	}{{"scheduled_for", m.ScheduledFor}, {"period_start", m.PeriodStart}, {"replay_until", m.ReplayUntil}} {
		if !f.t.IsZero() {
			if err := validateInstant(f.field, f.t, now); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateParams(params map[string]string) error {
	if len(params) > MaxParams {
		return fieldErrorf("params", "%d params, at most %d", len(params), MaxParams)
	}
	for k, v := range params {
		switch {
		case len(k) > MaxParamNameLen:
			return fieldErrorf("params", "a name is %d characters long, at most %d", utf8.RuneCountInString(k), MaxParamNameLen)
		case !paramNameRE.MatchString(k):
			return fieldErrorf("params", "the name %q: ASCII letters, digits and _ (what a catalog's {name} names)",
				strings.ToValidUTF8(strings.ReplaceAll(truncateRunes(k, 40), "\x00", `\u0000`), "?"))
		case !utf8.ValidString(v):
			return fieldErrorf("params", "the value of %q is not valid UTF-8", k)
		case strings.ContainsRune(v, 0):
			return fieldErrorf("params", `the value of %q holds a NUL character (\u0000), which PostgreSQL cannot store`, k)
		case utf8.RuneCountInString(v) > MaxParamValueLen:
			return fieldErrorf("params", "the value of %q is %d characters long, at most %d", k, utf8.RuneCountInString(v), MaxParamValueLen)
		}
	}
	return nil
}

// validateDestination checks the destination and the JID (never quoted:
// it may be a phone number).
func validateDestination(destination, jid string) error {
	if destination != "" && destination != DestinationIndividual && destination != DestinationGroup {
		return fieldErrorf("destination", "must be individual or group, got %q", truncateRunes(destination, 40))
	}
	if jid == "" {
		return nil
	}
	individual := phoneJIDRE.MatchString(jid) || lidJIDRE.MatchString(jid)
	group := groupJIDRE.MatchString(jid)
	switch {
	case !individual && !group:
		return fieldErrorf("jid", "is not a WhatsApp JID: give <phone number>@s.whatsapp.net (digits only, with the "+
			"country code, like 5511999990000@s.whatsapp.net), <lid>@lid or <group id>@g.us")
	case destination == DestinationGroup && !group:
		return fieldErrorf("jid", "destination group needs a group JID (<group id>@g.us)")
	case destination == DestinationIndividual && !individual:
		return fieldErrorf("jid", "destination individual needs a user's JID (<phone number>@s.whatsapp.net or <lid>@lid)")
	}
	return nil
}

// validateInstant checks that t lies from EarliestInstant to ScheduleAhead
// after now.
func validateInstant(field string, t, now time.Time) error {
	if t.Before(EarliestInstant) {
		return fieldErrorf(field, "%s is before %s", t.UTC().Format(time.RFC3339), EarliestInstant.Format(time.DateOnly))
	}
	if latest := now.Add(ScheduleAhead); t.After(latest) {
		return fieldErrorf(field, "%s is more than %d days ahead (after %s)", t.UTC().Format(time.RFC3339),
			int(ScheduleAhead/(24*time.Hour)), latest.UTC().Format(time.RFC3339))
	}
	return nil
}
