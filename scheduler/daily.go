// Package scheduler runs the engagement jobs: set-based, batched moves of
// users through the state machine, each with its messages and its log row.
//
// Every job is safe to run again at any time. Each batch is one statement
// over a chunk of user_engagement_states' pages that checks, row by row,
// that the user qualifies, so a user moved by the bot or by another run is
// skipped; it never waits for a row the bot holds locked (that user is
// skipped as "locked" and handled by a later run); messages go in under
// idempotency keys the queue's unique index enforces; and runs of the same
// job take turns on a lease (the run's row), so a second run waits for the
// first and then finds nothing left to do. No job holds more than the
// chunks in flight, however many users there are.
package scheduler

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// DailyJob is the daily job's name: in summaries, logs, engagement_job_runs
// and the application_name of its connections.
const DailyJob = "engagement-daily"

// RunDaily runs the daily job's three steps, in this order:
//
//  1. inactivity_14d: active users silent for 14 days get the goodbye
//     message queued and move to goodbye_sent (goodbye_sent_at = as-of,
//     goodbye_expires_at = as-of + 48 h);
//  2. goodbye_timeout: goodbyes unanswered for 48 h move to dormant;
//  3. reminder_due: remind_later users whose remind_at has come move to dormant.
//
// Opted-out users are never touched and users with no JID to send the
// goodbye to are left as they are; both count as skipped. The returned
// summary is complete even when a user failed; an error means the run
// stopped (database gone, lock or schema trouble) and the summary holds what
// was done until then.
func RunDaily(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	asOf := cfg.AsOf.UTC()
	day, dayEnd := sender.GoodbyePeriod(asOf)
	sum := &Summary{Job: DailyJob, AsOf: asOf, DryRun: cfg.DryRun, Errors: []UserError{}}
	args := pgx.NamedArgs{
		"as_of":               asOf,
		"inactive_before":     asOf.Add(-sm.InactivityPeriod),
		"goodbye_sent_before": asOf.Add(-sm.GoodbyeWindow),
		"goodbye_expires_at":  asOf.Add(sm.GoodbyeWindow),
		"key_suffix":          sender.GoodbyeKeySuffix(asOf),
		"period_start":        day,
		"replay_until":        dayEnd,
	}
	steps, err := dailySteps()
	if err != nil {
		return nil, err
	}
	err = runJob(ctx, pool, DailyJob, steps, args, cfg, sum)
	return sum, err
}

// dailySteps builds the three steps from the state machine's table, so the
// states and triggers the SQL uses are the table's.
func dailySteps() ([]step, error) {
	inactivity, err := transitionStep(sm.Active, sm.Inactivity14d,
		`s.last_activity_at < @inactive_before`,
		`goodbye_sent_at = @as_of, goodbye_expires_at = @goodbye_expires_at`)
	if err != nil {
		return nil, err
	}
	timeout, err := transitionStep(sm.GoodbyeSent, sm.GoodbyeTimeout,
		`(s.goodbye_expires_at <= @as_of
		  OR (s.goodbye_expires_at IS NULL AND s.goodbye_sent_at <= @goodbye_sent_before))`,
		``)
	if err != nil {
		return nil, err
	}
	reminder, err := transitionStep(sm.RemindLater, sm.ReminderDue,
		`s.remind_at <= @as_of`,
		``)
	if err != nil {
		return nil, err
	}
	return []step{inactivity, timeout, reminder}, nil
}

// transitionStep is the step that fires trigger on users in state from who
// satisfy qualifies (a predicate on s, their user_engagement_states row).
// The move sets state, plus set (extra assignments, may be empty); when the
// transition queues a message, it is inserted under its idempotency key,
// and every move is logged in engagement_state_transitions — all in one
// statement, so a user's state, message and log row commit together or not
// at all.
func transitionStep(from sm.State, trigger sm.Trigger, qualifies, set string) (step, error) {
	t, err := sm.Next(from, trigger)
	if err != nil {
		return step{}, fmt.Errorf("daily step %s: %w", trigger, err)
	}
	queues := t.Message == sm.GoodbyeMessage

	// Who qualifies, and why some are left out. Opted-out users are never
	// touched; users the message could not reach are left for later.
	skipReason := `WHEN p.reengagement_opt_out THEN '` + SkipOptedOut + `'`
	if queues {
		skipReason += ` WHEN NOT ` + sender.HasDestinationSQL + ` THEN '` + SkipNoDestination + `'`
	}
	selectSQL := `
		SELECT s.user_id, CASE ` + skipReason + ` ELSE '' END
		  FROM user_engagement_states s
		  JOIN user_profiles p ON p.user_id = s.user_id
		 WHERE s.state = @from_state AND ` + qualifies + `
		   AND ` + inShardSQL("s.user_id")

	if set != "" {
		set = ", " + set
	}
	// chunk: the step's users among the chunk's rows, with their profile.
	// OFFSET 0 keeps the profile a primary-key probe per user: joined
	// plainly, the planner hashed every profile for every chunk.
	//
	// locked: the bot holds rows while it handles a user's message. The
	// chunk skips them rather than wait (a later run moves those users),
	// and reports how many it skipped.
	//
	// moved: the UPDATE re-checks what chunk checked: a user changed in
	// between (by the bot, or another run) is not moved. The profile is
	// not locked: the state row is the one the move changes.
	chunk := `
		chunk AS MATERIALIZED (
		    SELECT s.user_id, p.skip_reason, p.destination, p.destination_jid
		      FROM user_engagement_states s
		      CROSS JOIN LATERAL (
		          SELECT CASE ` + skipReason + ` ELSE '' END AS skip_reason,
		                 ` + sender.DestinationSQL + ` AS destination,
		                 ` + sender.DestinationJIDSQL + ` AS destination_jid
		            FROM user_profiles p
		           WHERE p.user_id = s.user_id
		          OFFSET 0
		      ) p
		     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
		       AND s.state = @from_state AND ` + qualifies + `
		       AND ` + inShardSQL("s.user_id") + `
		), locked AS MATERIALIZED (
		    SELECT s.user_id
		      FROM user_engagement_states s
		     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
		       AND s.state = @from_state AND ` + qualifies + `
		       AND s.user_id IN (SELECT user_id FROM chunk WHERE skip_reason = '')
		       FOR NO KEY UPDATE SKIP LOCKED
		), moved AS (
		    UPDATE user_engagement_states s
		       SET state = @to_state, updated_at = now()` + set + `
		      FROM chunk c
		     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
		       AND s.user_id IN (SELECT user_id FROM locked) AND c.user_id = s.user_id
		       AND s.state = @from_state AND ` + qualifies + `
		 RETURNING s.user_id, c.destination, c.destination_jid
		)`
	logged := `
		logged AS (
		    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
		    SELECT user_id, @from_state, @to_state, @trigger, @run_id::bigint FROM moved
		)`
	// ON CONFLICT DO NOTHING: a key already taken (this day's goodbye
	// exists) queues nothing and counts as a duplicate. It does not lock
	// the row it conflicts with, so a goodbye the bot holds is no wait.
	queued := `
		queued AS (SELECT 1 WHERE false)`
	if queues {
		queued = `
		queued AS (
		    INSERT INTO engagement_message_queue
		           (user_id, message_type, message_key, destination, destination_jid,
		            scheduled_for, idempotency_key, period_start, replay_until, job_run_id)
		    SELECT user_id, @message_type, @message_key, destination, destination_jid,
		           least(@as_of::timestamptz, now()), user_id::text || @key_suffix::text,
		           @period_start::timestamptz, @replay_until::timestamptz, @run_id::bigint
		      FROM moved
		    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
		    RETURNING 1
		)`
	}
	moveSQL := `WITH` + chunk + `,` + queued + `,` + logged + `
		SELECT count(*)::int,
		       (SELECT count(*) FROM moved)::int,
		       (SELECT count(*) FROM queued)::int,
		       (count(*) FILTER (WHERE skip_reason = '') - (SELECT count(*) FROM locked))::int,
		       count(*) FILTER (WHERE skip_reason = '` + SkipOptedOut + `')::int,
		       count(*) FILTER (WHERE skip_reason = '` + SkipNoDestination + `')::int
		  FROM chunk`

	messageType := ""
	if queues {
		messageType = sender.TypeGoodbye
	}
	return step{
		name:        string(trigger),
		messageType: messageType,
		args: pgx.NamedArgs{
			"from_state":   string(t.From),
			"to_state":     string(t.To),
			"trigger":      string(t.Trigger),
			"message_type": sender.TypeGoodbye,
			"message_key":  sender.KeyGoodbye,
		},
		selectSQL: selectSQL,
		moveSQL:   moveSQL,
	}, nil
}
