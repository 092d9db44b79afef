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
// and opt-out and counting their transactions in the window. Users whose
// review of the week is queued already count as done (and as duplicates)
// after one index probe, so a same-week re-run costs little more than
// finding the week's users.
var weeklyReviewStep = step{
	name:        "weekly_review",
	messageType: sender.TypeWeeklyReview,
	selectSQL: `
		SELECT user_id,
		       CASE WHEN opted_out THEN '` + SkipOptedOut + `'
		            WHEN NOT has_destination THEN '` + SkipNoDestination + `'
		            ELSE '' END
		  FROM (` + activity.ActiveUsersSQL + `) AS active`,
	moveSQL: `
		WITH batch AS MATERIALIZED (
		    -- A review queued by an earlier run of the week costs one index
		    -- probe here, and nothing more.
		    SELECT u.user_id, u.user_id::text || @key_suffix::text AS idempotency_key,
		           EXISTS (SELECT 1 FROM engagement_message_queue q
		                    WHERE q.idempotency_key = u.user_id::text || @key_suffix::text) AS queued_before
		      FROM unnest(@user_ids::uuid[]) AS u (user_id)
		), reviewed AS (
		    SELECT b.user_id, b.idempotency_key, ` + sender.DestinationSQL + ` AS destination,
		           ` + sender.DestinationJIDSQL + ` AS destination_jid
		      FROM batch b
		      JOIN user_engagement_states s ON s.user_id = b.user_id
		      JOIN user_profiles p ON p.user_id = b.user_id
		     WHERE NOT b.queued_before
		       AND s.state IN ('active', 'help_flow')
		       AND NOT p.reengagement_opt_out AND ` + sender.HasDestinationSQL + `
		), queued AS (
		    INSERT INTO engagement_message_queue
		           (user_id, message_type, message_key, message_params, destination, destination_jid,
		            scheduled_for, idempotency_key, job_run_id)
		    SELECT r.user_id, @message_type, @message_key,
		           jsonb_build_object('count', c.transactions::text),
		           r.destination, r.destination_jid,
		           least(@as_of::timestamptz, now()), r.idempotency_key, @run_id::bigint
		      FROM reviewed r
		      CROSS JOIN LATERAL (
		          SELECT count(*) AS transactions FROM transactions t
		           WHERE t.user_id = r.user_id AND t.created_at > @window_start AND t.created_at <= @as_of
		      ) c
		    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
		    RETURNING 1
		)
		SELECT ((SELECT count(*) FROM reviewed) + (SELECT count(*) FROM batch WHERE queued_before))::int,
		       (SELECT count(*) FROM queued)::int`,
	existingSQL: existingKeysSQL,
}
