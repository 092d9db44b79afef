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
	// At is when the user said it; the transaction's time when zero.
	At time.Time
	// Actor is the operator who recorded it, if one did.
	Actor string
	// Confirm asks OptOut to queue the opt-out's confirmation (the
	// catalog's engagement.opt_out.confirmation, message kind
	// opt_out_confirmation) when it changed something and At is within the
	// last 24 hours. Off by default; OptIn ignores it.
	Confirm bool
}

// OptOut records that the user does not want re-engagement messages, from
// source: user_profiles.reengagement_opt_out, which every job and the
// send-time check read, and a row of engagement_consent_events; the user's
// pending messages are cancelled ('opted_out') in the same statement. It
// reports whether anything changed (false: opted out already, nothing
// recorded). Errors: ErrUnknownUser (no profile), ErrNoSource,
// ErrInstantOutOfRange.
func OptOut(ctx context.Context, db Querier, userID, source string, o ConsentOptions) (bool, error) {
	return consent(ctx, db, userID, true, source, o)
}

// OptIn records that the user wants re-engagement messages again, from
// source, as OptOut does the other way (nothing is requeued).
func OptIn(ctx context.Context, db Querier, userID, source string, o ConsentOptions) (bool, error) {
	return consent(ctx, db, userID, false, source, o)
}

func consent(ctx context.Context, db Querier, userID string, optOut bool, source string, o ConsentOptions) (bool, error) {
	name := map[bool]string{true: "engagement_opt_out", false: "engagement_opt_in"}[optOut]
	row, err := optOutQuery.One(ctx, db, optOutArgs{OptOut: optOut, UserID: userID, Source: source,
		At: instant(o.At), Actor: optional(o.Actor), Confirm: o.Confirm})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case SQLStateUnknownUser:
			return false, fmt.Errorf("%s: %w %s", name, ErrUnknownUser, userID)
		case SQLStateNoSource:
			return false, fmt.Errorf("%s: %w", name, ErrNoSource)
		case SQLStateInstantOutOfRange:
			return false, fmt.Errorf("%s: %w: %s", name, ErrInstantOutOfRange, o.At.UTC().Format(time.RFC3339Nano))
		}
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	return row.Changed, nil
}
