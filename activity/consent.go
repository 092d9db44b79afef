package activity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLStateNoSource is what engagement_opt_out and engagement_opt_in raise
// (migration 52) for a source that is empty or over 200 characters; an
// unknown user is SQLStateUnknownUser, an instant out of range
// SQLStateInstantOutOfRange, as for Fire.
const SQLStateNoSource = "EN008"

// ErrNoSource is returned by OptOut and OptIn without a source (or one
// over 200 characters).
var ErrNoSource = errors.New("a consent change needs its source")

// The sources the project's own doors record; a bot may name its own
// (up to 200 characters).
const (
	SourceKeyword         = "bot:keyword"           // the user wrote PARAR, STOP, …
	SourceMetaPreferences = "meta:user_preferences" // WhatsApp's "stop promotions", by Meta's webhook
	SourceWhatsApp131050  = "whatsapp:131050"       // a send refused: the user stopped marketing messages
	SourceConsole         = "console"               // an operator, on the console (actor: who)
	SourceEngagementctl   = "engagementctl"         // an operator, by engagementctl (actor: who)
)

// ConsentOptions are OptOut's and OptIn's optional arguments.
type ConsentOptions struct {
	// At is when the user said it (a message's timestamp, Meta's entry's,
	// the moment WhatsApp refused a send); when zero, the moment the
	// statement runs (the database's clock_timestamp()). The user's
	// consent follows the newest of their wishes, by this instant,
	// whatever order the calls arrive in (docs/consent.md, "Consent in the
	// user's time").
	At time.Time
	// Actor is the operator who recorded it, if one did.
	Actor string
	// Confirm asks OptOut to queue the opt-out's confirmation (the
	// catalog's engagement.opt_out.confirmation, message kind
	// opt_out_confirmation) when it changed something and At is within the
	// last 24 hours. Off by default; OptIn ignores it.
	Confirm bool
}

// ConsentOutcome is what a consent call did (engagement_consent_record,
// migration 68).
type ConsentOutcome string

const (
	// ConsentChanged: the user's newest wish, and their flag was the other
	// way: set, recorded, and for an opt-out their pending messages
	// cancelled.
	ConsentChanged ConsentOutcome = "changed"
	// ConsentUnchanged: the user's newest wish, and the flag was so
	// already: nothing recorded.
	ConsentUnchanged ConsentOutcome = "unchanged"
	// ConsentSuperseded: older than a wish the user made later (at the
	// same instant, an opt-in is older than an opt-out): recorded in the
	// consent log as superseded, nothing else changed.
	ConsentSuperseded ConsentOutcome = "superseded"
)

// OptOut records that the user does not want re-engagement messages, from
// source: user_profiles.reengagement_opt_out, which every job and the
// send-time check read, and a row of engagement_consent_events; the user's
// pending messages are cancelled ('opted_out') in the same statement. It
// reports whether anything changed (false: opted out already, nothing
// recorded; or older than the user's newest wish, recorded as superseded).
// Errors: ErrUnknownUser (no profile), ErrNoSource, ErrInstantOutOfRange.
func OptOut(ctx context.Context, db Querier, userID, source string, o ConsentOptions) (bool, error) {
	out, err := Consent(ctx, db, userID, true, source, o)
	return out == ConsentChanged, err
}

// OptIn records that the user wants re-engagement messages again, from
// source, as OptOut does the other way (nothing is requeued).
func OptIn(ctx context.Context, db Querier, userID, source string, o ConsentOptions) (bool, error) {
	out, err := Consent(ctx, db, userID, false, source, o)
	return out == ConsentChanged, err
}

// Consent is OptOut (optOut true) or OptIn, saying what the call did.
func Consent(ctx context.Context, db Querier, userID string, optOut bool, source string, o ConsentOptions) (ConsentOutcome, error) {
	name := map[bool]string{true: "engagement_opt_out", false: "engagement_opt_in"}[optOut]
	row, err := optOutQuery.One(ctx, db, optOutArgs{OptOut: optOut, UserID: userID, Source: source,
		At: instant(o.At), Actor: optional(o.Actor), Confirm: optOut && o.Confirm})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case SQLStateUnknownUser:
			return "", fmt.Errorf("%s: %w %s", name, ErrUnknownUser, userID)
		case SQLStateNoSource:
			return "", fmt.Errorf("%s: %w", name, ErrNoSource)
		case SQLStateInstantOutOfRange:
			return "", fmt.Errorf("%s: %w: %s", name, ErrInstantOutOfRange, o.At.UTC().Format(time.RFC3339Nano))
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return ConsentOutcome(row.Outcome), nil
}
