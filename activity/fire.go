package activity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// The SQLSTATEs engagement_fire raises (migrations 30 and 45); each leaves
// the user as they were.
const (
	SQLStateUnknownTrigger    = "EN001" // not a trigger of the state machine
	SQLStateJobTrigger        = "EN002" // a trigger of the scheduler's jobs, not the bot's
	SQLStateUnknownUser       = "EN003" // no user_engagement_states row
	SQLStateNotAMove          = "EN004" // not a move from the user's current state (DETAIL: that state)
	SQLStateInstantOutOfRange = "EN005" // the move's instant is infinite, before 2000 or beyond the clock skew
	SQLStateKeyOfAnotherUser  = "EN006" // the request key was used for another user's move
)

// MaxFireSkew is how far ahead of the database clock a move's instant may
// be: clock skew between the bot's host and the database's, as the jobs'
// --as-of allows it. Later instants (and infinities, and any before
// 2000-01-01) are refused with SQLStateInstantOutOfRange.
const MaxFireSkew = 5 * time.Minute

// ErrInstantOutOfRange is returned by Fire for an instant the bot cannot
// mean (FireOptions.At beyond MaxFireSkew, before 2000): stored, it would
// keep the user from every goodbye, since activity never moves back.
var ErrInstantOutOfRange = errors.New("instant out of range")

// ErrRequestKeyOfAnotherUser is returned by Fire for a request key that an
// earlier call used for another user: a key is one user's.
var ErrRequestKeyOfAnotherUser = errors.New("request key used for another user")

// ErrNotABotTrigger is returned by Fire for a trigger the scheduler's jobs
// fire (inactivity_14d, goodbye_timeout, …), not the bot.
var ErrNotABotTrigger = errors.New("not a trigger the bot fires")

// ErrUnknownUser is returned by Fire for a user without engagement state.
var ErrUnknownUser = errors.New("unknown user")

// FireOptions are Fire's optional arguments.
type FireOptions struct {
	// At is the move's instant; the transaction's (now) when zero.
	At time.Time
	// RequestKey makes the call idempotent: a later call for the same user
	// with the same key changes nothing and returns the state the first one
	// left (a retried webhook, a message handled twice); the key on another
	// user's call is refused (ErrRequestKeyOfAnotherUser). Empty: none.
	RequestKey string
}

// Fire applies the bot's trigger t (user_message, goodbye_answer_help,
// goodbye_answer_remind_later, goodbye_answer_dormant) to the user, as the
// state machine's table says, logs the move, and returns the user's state
// afterwards: one statement, engagement_fire, which works through a
// transaction pooler and needs only EXECUTE on it. Errors: an unknown
// trigger wraps sm.ErrUnknownTrigger, a job's trigger ErrNotABotTrigger,
// an unknown user ErrUnknownUser, an instant out of range
// ErrInstantOutOfRange, a request key another user's call used
// ErrRequestKeyOfAnotherUser, and a trigger that is no move from the
// user's state is a *sm.TransitionError (wrapping sm.ErrInvalidTransition);
// each leaves the user as they were.
func Fire(ctx context.Context, db Querier, userID string, t sm.Trigger, o FireOptions) (sm.State, error) {
	row, err := fireQuery.One(ctx, db, fireArgs{UserID: userID, Trigger: string(t), At: instant(o.At), RequestKey: optional(o.RequestKey)})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case SQLStateUnknownTrigger:
			if t.Valid() && !t.ByBot() {
				// A timer newer than engagement_fire's list of them.
				return "", fmt.Errorf("engagement_fire: %q: %w", t, ErrNotABotTrigger)
			}
			return "", fmt.Errorf("engagement_fire: %w %q", sm.ErrUnknownTrigger, t)
		case SQLStateJobTrigger:
			return "", fmt.Errorf("engagement_fire: %q: %w", t, ErrNotABotTrigger)
		case SQLStateUnknownUser:
			return "", fmt.Errorf("engagement_fire: %w %s", ErrUnknownUser, userID)
		case SQLStateNotAMove:
			return "", &sm.TransitionError{From: sm.State(pgErr.Detail), Trigger: t} // DETAIL: the user's state
		case SQLStateInstantOutOfRange:
			return "", fmt.Errorf("engagement_fire: %w: %s", ErrInstantOutOfRange, o.At.UTC().Format(time.RFC3339Nano))
		case SQLStateKeyOfAnotherUser:
			return "", fmt.Errorf("engagement_fire: %w", ErrRequestKeyOfAnotherUser)
		}
	}
	if err != nil {
		return "", fmt.Errorf("engagement_fire: %w", err)
	}
	return sm.State(row.State), nil
}

// instant is at, or NULL (the transaction's time) when at is zero.
func instant(at time.Time) *time.Time {
	if at.IsZero() {
		return nil
	}
	return &at
}

// optional is s, or NULL when s is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
