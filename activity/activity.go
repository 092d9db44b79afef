// Package activity finds the users who were active in a window of time: a
// transaction created in it, or bot activity (last_activity_at) in it. The
// weekly review uses its window (WindowArgs); its statement
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
	"embed"
	"fmt"
	"iter"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// The package's statements, one complete statement per file in queries/.
//
//go:embed queries/*.sql
var queryFiles embed.FS

var (
	activeUsersLastWeekSQL = sqlfile.Must(queryFiles, "active_users_last_week")
	activityCountSQL       = sqlfile.Must(queryFiles, "activity_count")
)

// WindowArgs are the named arguments @window_start and @as_of of a
// statement over the week that ends at asOf: (asOf − 7 days, asOf].
func WindowArgs(asOf time.Time) sqlfile.Args {
	return sqlfile.Args{"window_start": asOf.Add(-sm.WeeklyWindow), "as_of": asOf}
}

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
		args := WindowArgs(asOf)
		args["states"] = reviewStates()
		rows, err := db.Query(ctx, activeUsersLastWeekSQL, args)
		if err != nil {
			yield(ActiveUser{}, fmt.Errorf("find active users: %w", err))
			return
		}
		defer rows.Close()
		var u ActiveUser
		for rows.Next() {
			if err := rows.Scan(&u.UserID, &u.State, &u.Transactions, &u.Destination, &u.DestinationJID, &u.Locale); err != nil {
				yield(ActiveUser{}, fmt.Errorf("find active users: %w", err))
				return
			}
			if !yield(u, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(ActiveUser{}, fmt.Errorf("find active users: %w", err))
		}
	}
}

// ActivityCount counts userID's transactions created in the days days up to
// asOf: (asOf − days, asOf].
func ActivityCount(ctx context.Context, db Querier, userID string, days int, asOf time.Time) (int, error) {
	if days < 0 {
		return 0, fmt.Errorf("activity count: days must not be negative, got %d", days)
	}
	var n int
	err := db.QueryRow(ctx, activityCountSQL, sqlfile.Args{
		"user_id": userID, "since": asOf.AddDate(0, 0, -days), "as_of": asOf,
	}).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("activity count: %w", err)
	}
	return n, nil
}
