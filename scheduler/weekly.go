package scheduler

import (
	"context"
	"maps"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/sender"
)

// WeeklyJob is the weekly job's name.
const WeeklyJob = "engagement-weekly"

// RunWeekly queues one celebratory weekly review for every user who was
// active in the 7 days up to the as-of instant (a transaction or bot
// activity), in state active or help_flow. The review carries the user's
// transaction count in the window ({"count":"3"}) and the idempotency key
// {userId}:weekly_review:{ISO week of the as-of instant}, so a user gets at
// most one review per ISO week however often the job runs. States are not
// changed. Opted-out users and users with no destination are skipped.
func RunWeekly(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	asOf := cfg.AsOf.UTC()
	sum := &Summary{Job: WeeklyJob, AsOf: asOf, ISOWeek: sender.ISOWeek(asOf), DryRun: cfg.DryRun, Errors: []UserError{}}
	args := activity.WindowArgs(asOf)
	maps.Copy(args, pgx.NamedArgs{
		"key_suffix":   sender.WeeklyReviewKeySuffix(asOf),
		"message_type": sender.TypeWeeklyReview,
		"message_key":  sender.KeyWeeklyReview,
	})
	err := runJob(ctx, pool, WeeklyJob, []step{weeklyReviewStep}, args, cfg, sum)
	return sum, err
}

// weeklyReviewStep selects the week's active users (package activity) and
// queues a batch's reviews in one statement, re-checking each user's state
// and opt-out and counting their transactions in the window.
var weeklyReviewStep = step{
	name: "weekly_review",
	selectSQL: `
		SELECT user_id,
		       CASE WHEN opted_out THEN '` + SkipOptedOut + `'
		            WHEN NOT has_destination THEN '` + SkipNoDestination + `'
		            ELSE '' END
		  FROM (` + activity.ActiveUsersSQL + `) AS active`,
	moveSQL: `
		WITH reviewed AS (
		    SELECT s.user_id, ` + sender.DestinationSQL + ` AS destination,
		           ` + sender.DestinationJIDSQL + ` AS destination_jid
		      FROM user_engagement_states s
		      JOIN user_profiles p ON p.user_id = s.user_id
		     WHERE s.user_id = ANY(@user_ids::uuid[]) AND p.user_id = ANY(@user_ids::uuid[])
		       AND s.state IN ('active', 'help_flow')
		       AND NOT p.reengagement_opt_out AND ` + sender.HasDestinationSQL + `
		), counted AS (
		    SELECT user_id, count(*) AS transactions
		      FROM transactions
		     WHERE user_id = ANY(@user_ids::uuid[]) AND created_at > @window_start AND created_at <= @as_of
		     GROUP BY user_id
		), queued AS (
		    INSERT INTO engagement_message_queue
		           (user_id, message_type, message_key, message_params, destination, destination_jid,
		            scheduled_for, idempotency_key)
		    SELECT r.user_id, @message_type, @message_key,
		           jsonb_build_object('count', coalesce(c.transactions, 0)::text),
		           r.destination, r.destination_jid,
		           least(@as_of::timestamptz, now()), r.user_id::text || @key_suffix::text
		      FROM reviewed r LEFT JOIN counted c ON c.user_id = r.user_id
		    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
		    RETURNING 1
		)
		SELECT (SELECT count(*) FROM reviewed)::int, (SELECT count(*) FROM queued)::int`,
	existingSQL: existingKeysSQL,
}
