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
	week, weekEnd := sender.WeeklyReviewPeriod(asOf)
	args := activity.WindowArgs(asOf)
	maps.Copy(args, pgx.NamedArgs{
		"period_start": week,
		"replay_until": weekEnd,
		"key_suffix":   sender.WeeklyReviewKeySuffix(asOf),
		"message_type": sender.TypeWeeklyReview,
		"message_key":  sender.KeyWeeklyReview,
	})
	err := runJob(ctx, pool, WeeklyJob, []step{weeklyReviewStep}, args, cfg, sum)
	return sum, err
}

// weeklyReviewStep queues the reviews of a chunk's users in one statement:
// the chunk's users in state active or help_flow, with their transactions
// of the window counted (one probe of transactions' (user_id, created_at)
// index each), those active in the window kept, their profile read, and a
// review queued for each one who is not opted out and has a destination.
// A review queued by an earlier run of the week is a duplicate, found with
// one index probe (and, racing another insert, by ON CONFLICT DO NOTHING,
// which does not lock the review it finds), so a same-week re-run costs
// little more than finding the week's users.
//
// The review locks no row: states and profiles are only read, and the
// queue has no foreign key, so a user whose rows the bot holds is reviewed
// without waiting. (The one wait left is another transaction inserting the
// same review key and not yet committed: only another run of the week
// does that, and runs take turns.)
var weeklyReviewStep = step{
	name:        "weekly_review",
	messageType: sender.TypeWeeklyReview,
	selectSQL: `
		SELECT user_id,
		       CASE WHEN opted_out THEN '` + SkipOptedOut + `'
		            WHEN NOT has_destination THEN '` + SkipNoDestination + `'
		            ELSE '' END
		  FROM (` + activity.ActiveUsersSQL + `) AS active
		 WHERE ` + inShardSQL("active.user_id"),
	moveSQL: `
		WITH active AS MATERIALIZED (
		    SELECT s.user_id, w.transactions,
		           -- Queued by an earlier run of the week: a duplicate, found
		           -- with one index probe and nothing more. (A scalar
		           -- subquery, not EXISTS: the planner may run an EXISTS as
		           -- a hash of every queued key, once per chunk.)
		           (SELECT true FROM engagement_message_queue q
		             WHERE q.idempotency_key = s.user_id::text || @key_suffix::text) IS NOT NULL AS queued_before
		      FROM user_engagement_states s
		      CROSS JOIN LATERAL (
		          SELECT count(*)::int AS transactions FROM transactions t
		           WHERE t.user_id = s.user_id AND t.created_at > @window_start AND t.created_at <= @as_of
		      ) w
		     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
		       AND s.state IN ('active', 'help_flow')
		       AND (w.transactions > 0 OR (s.last_activity_at > @window_start AND s.last_activity_at <= @as_of))
		       AND ` + inShardSQL("s.user_id") + `
		), chunk AS MATERIALIZED (
		    -- OFFSET 0 keeps the profile a primary-key probe per user:
		    -- joined plainly, the planner hashed every profile per chunk.
		    SELECT a.user_id, a.transactions, a.queued_before,
		           coalesce(p.skip_reason, '') AS skip_reason, p.destination, p.destination_jid
		      FROM active a
		      LEFT JOIN LATERAL (
		          SELECT CASE WHEN p.reengagement_opt_out THEN '` + SkipOptedOut + `'
		                      WHEN NOT ` + sender.HasDestinationSQL + ` THEN '` + SkipNoDestination + `'
		                      ELSE '' END AS skip_reason,
		                 ` + sender.DestinationSQL + ` AS destination,
		                 ` + sender.DestinationJIDSQL + ` AS destination_jid
		            FROM user_profiles p
		           WHERE p.user_id = a.user_id AND NOT a.queued_before
		          OFFSET 0
		      ) p ON true
		), queued AS (
		    INSERT INTO engagement_message_queue
		           (user_id, message_type, message_key, message_params, destination, destination_jid,
		            scheduled_for, idempotency_key, period_start, replay_until, job_run_id)
		    SELECT c.user_id, @message_type, @message_key,
		           jsonb_build_object('count', c.transactions::text),
		           c.destination, c.destination_jid,
		           least(@as_of::timestamptz, now()), c.user_id::text || @key_suffix::text,
		           @period_start::timestamptz, @replay_until::timestamptz, @run_id::bigint
		      FROM chunk c
		     WHERE c.skip_reason = '' AND NOT c.queued_before
		    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
		    RETURNING 1
		)
		SELECT count(*)::int,
		       count(*) FILTER (WHERE skip_reason = '')::int,
		       (SELECT count(*) FROM queued)::int,
		       0,
		       count(*) FILTER (WHERE skip_reason = '` + SkipOptedOut + `')::int,
		       count(*) FILTER (WHERE skip_reason = '` + SkipNoDestination + `')::int
		  FROM chunk`,
}
