// Package activity finds the users who were active in a window of time: a
// transaction created in it, or bot activity (last_activity_at) in it. The
// weekly review uses its window (WindowStart); its statement
// (scheduler/queries/weekly_review.sql) selects the same users chunk by
// chunk.
//
// ActiveUsersLastWeek and ActivityCount are the bot's API (the bot is a Go
// program that imports this package): the same definition of "active" the
// weekly review uses, for the bot's own replies and admin views. No job
// calls them. ActiveUsersLastWeek is one aggregated query: the window's
// transactions are counted per user once, joined to the users, and
// streamed back, so finding the active users of a million costs one scan
// and constant memory.
package activity

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// The package's statements are its queries/*.sql files, typed in
// queries.gen.go (make sql).

// WindowStart is the start of the week that ends at asOf: a statement over
// that week takes (WindowStart(asOf), asOf], as @window_start and @as_of.
func WindowStart(asOf time.Time) time.Time { return asOf.Add(-sm.WeeklyWindow) }

// ActiveUser is a user active in the window.
type ActiveUser struct {
	UserID         string
	State          sm.State
	Transactions   int    // transactions created in the window
	Destination    string // routed: "individual" or "group"
	DestinationJID string // "" when the user has no destination
	Locale         string
}

// Querier is a pgx pool, connection or transaction.
type Querier = postgres.Querier

// reviewStates are the states the weekly review may be sent in (its kind's
// SendWhile): the users it is for.
func reviewStates() []string {
	review, _ := sm.KindOf(sm.WeeklyReviewMessage)
	out := make([]string, len(review.SendWhile))
	for i, s := range review.SendWhile {
		out[i] = string(s)
	}
	return out
}

// ActiveUsersLastWeek streams the users who were active in the 7 days up to
// asOf, in state active or help_flow and not opted out, with their
// transaction count in the window. Memory stays flat: rows are decoded one at
// a time. Stop early by breaking out of the loop.
func ActiveUsersLastWeek(ctx context.Context, db Querier, asOf time.Time) iter.Seq2[ActiveUser, error] {
	return func(yield func(ActiveUser, error) bool) {
		args := activeUsersLastWeekArgs{WindowStart: WindowStart(asOf), AsOf: asOf, States: reviewStates()}
		err := activeUsersLastWeekQuery.Each(ctx, db, args, func(r *activeUsersLastWeekRow) error {
			u := ActiveUser{UserID: r.UserID, State: sm.State(r.State), Transactions: r.Transactions,
				Destination: r.Destination, DestinationJID: r.DestinationJID, Locale: r.Locale}
			if !yield(u, nil) {
				return errStopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopped) {
			yield(ActiveUser{}, fmt.Errorf("find active users: %w", err))
		}
	}
}

// errStopped ends a statement's Each when the caller's loop broke off.
var errStopped = errors.New("stopped")

// ActivityCount counts userID's transactions created in the days days up to
// asOf: (asOf − days, asOf].
func ActivityCount(ctx context.Context, db Querier, userID string, days int, asOf time.Time) (int, error) {
	if days < 0 {
		return 0, fmt.Errorf("activity count: days must not be negative, got %d", days)
	}
	row, err := activityCountQuery.One(ctx, db, activityCountArgs{UserID: userID, Since: asOf.AddDate(0, 0, -days), AsOf: asOf})
	if err != nil {
		return 0, fmt.Errorf("activity count: %w", err)
	}
	return row.Transactions, nil
}
