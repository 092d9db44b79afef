// Package activity finds the users who were active in a window of time: a
// transaction created in it, or bot activity (last_activity_at) in it. The
// weekly review is built on it.
//
// Everything is one aggregated query: the window's transactions are counted
// per user once, joined to the users, and streamed back, so finding the
// active users of a million costs one scan and constant memory.
package activity

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// ActiveUsersSQL selects the users in state active or help_flow with a
// transaction or bot activity in (@window_start, @as_of], one row each:
// user_id, state, transactions (count in the window), opted_out,
// has_destination, destination, destination_jid, locale. Opted-out users are
// included so callers can count them; ActiveUsersLastWeek leaves them out.
const ActiveUsersSQL = `
	WITH window_transactions AS (
	    SELECT user_id, count(*)::int AS transactions
	      FROM transactions
	     WHERE created_at > @window_start AND created_at <= @as_of
	     GROUP BY user_id
	)
	SELECT s.user_id, s.state, coalesce(w.transactions, 0) AS transactions,
	       p.reengagement_opt_out AS opted_out,
	       ` + sender.HasDestinationSQL + ` AS has_destination,
	       ` + sender.DestinationSQL + ` AS destination,
	       coalesce(` + sender.DestinationJIDSQL + `, '') AS destination_jid,
	       p.locale
	  FROM user_engagement_states s
	  JOIN user_profiles p ON p.user_id = s.user_id
	  LEFT JOIN window_transactions w ON w.user_id = s.user_id
	 WHERE s.state IN ('active', 'help_flow')
	   AND (w.user_id IS NOT NULL
	        OR (s.last_activity_at > @window_start AND s.last_activity_at <= @as_of))`

// WindowArgs are the named arguments of ActiveUsersSQL for the week that
// ends at asOf: (asOf − 7 days, asOf].
func WindowArgs(asOf time.Time) pgx.NamedArgs {
	return pgx.NamedArgs{"window_start": asOf.Add(-sm.WeeklyWindow), "as_of": asOf}
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
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ActiveUsersLastWeek streams the users who were active in the 7 days up to
// asOf, in state active or help_flow and not opted out, with their
// transaction count in the window. Memory stays flat: rows are decoded one at
// a time. Stop early by breaking out of the loop.
func ActiveUsersLastWeek(ctx context.Context, db Querier, asOf time.Time) iter.Seq2[ActiveUser, error] {
	return func(yield func(ActiveUser, error) bool) {
		rows, err := db.Query(ctx, `
			SELECT user_id::text, state, transactions, destination, destination_jid, locale
			  FROM (`+ActiveUsersSQL+`) AS a
			 WHERE NOT opted_out`, WindowArgs(asOf))
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
	err := db.QueryRow(ctx, `
		SELECT count(*)::int FROM transactions
		 WHERE user_id = $1 AND created_at > $2 AND created_at <= $3`,
		userID, asOf.AddDate(0, 0, -days), asOf).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("activity count: %w", err)
	}
	return n, nil
}
