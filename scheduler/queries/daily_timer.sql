-- Step of a timer on the user's row: @from_states -@trigger-> @to_state.
--
-- The daily job's step for every timer of the state machine's table whose
-- clock is a time on the user's engagement row (statemachine.Clock:
-- last_activity, remind_at, state_entered) and that has no statement of its
-- own: reminder_due today (remind_later -> dormant at remind_at). Moves the
-- users of one chunk of user_engagement_states (the rows whose ctid lies
-- in [@first, @end)) who are in any of @from_states and whose timer has
-- run out at @as_of: engagement_clock(@clock, …) + @wait <= @as_of
-- (migration 42, the definition verify's no_user_stuck uses too). Each
-- gets state @to_state and state_entered_at @as_of, and its move is logged
-- (@trigger, run @run_id) in the same statement. Everything here is a
-- parameter from the table (scheduler.timerMove).
--
-- With @queue (the transition's kind, statemachine.Kinds; a kind queued on
-- request only when asked, engagement-daily --send-reminder), each moved
-- user who has not opted out and has a destination (engagement_route) also
-- gets the kind's message (@message_type, @message_key) under the key
-- user_id || @key_infix || the period's label: @key_suffix for a kind whose
-- period is the run's (its day or ISO week, [@period_start,
-- @replay_until)), or, when @key_suffix is NULL, the instant the timer ran
-- out in Unix milliseconds (a reminder: {userId}:reminder:{remind_at}), in
-- the same statement. An opted-out user's timer completes silently: they
-- move, never messaged. Only the run's shard (@shard_index of
-- @shard_count) is seen: a @shard_count of 1 is every user.
--
-- A dry run (@dry_run: engagement-daily --dry-run, the console's
-- forecast) is this statement over the whole table, with @first and @end
-- spanning every row: it locks, moves, queues and logs nobody (locked is
-- empty, so moved, queued and logged are), and counts instead the users
-- the move would take (would), every row taken to be free, and with
-- @queue the messages whose keys are not taken yet: an upper bound, as
-- the dry run has always counted, since an opted-out user or one without
-- a destination gets none.
--
-- Returns the chunk's counters: candidates, moved, queued, locked (rows
-- the bot held: skipped, a later run moves them), opted out and no
-- destination (always 0: every user's timer completes; a message that
-- cannot be queued is simply not queued), and the keys already taken; in a
-- dry run, what the move would do.
-- nullable: @run_id, @message_type, @message_key, @key_suffix, @period_start, @replay_until
WITH chunk AS MATERIALIZED (
    -- The profile through engagement_send_route (migration 88): one
    -- primary-key probe per user.
    SELECT s.user_id, s.state, d.due, p.opted_out, p.destination, p.destination_jid,
           s.user_id::text || @key_infix::text
             || coalesce(@key_suffix::text, floor(extract(epoch FROM d.due) * 1000)::bigint::text) AS key
      FROM user_engagement_states s
      CROSS JOIN LATERAL (
          SELECT engagement_clock(@clock::text, s.last_activity_at, s.created_at, s.remind_at,
                                  s.state_entered_at, s.state_changed_xact_at) + @wait::interval AS due
      ) d
      CROSS JOIN LATERAL engagement_send_route(s.user_id) p
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state = ANY(@from_states::text[]) AND d.due <= @as_of::timestamptz
       AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
), locked AS MATERIALIZED (
    -- Rows the bot holds are skipped rather than waited for, and counted.
    SELECT s.user_id
      FROM user_engagement_states s
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.user_id IN (SELECT user_id FROM chunk)
       AND NOT @dry_run::boolean
       FOR NO KEY UPDATE SKIP LOCKED
), moved AS (
    -- Re-checks what chunk checked: a user changed in between is not moved.
    UPDATE user_engagement_states s
       SET state = @to_state, updated_at = now(), state_entered_at = @as_of::timestamptz
      FROM chunk c
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.user_id IN (SELECT user_id FROM locked) AND c.user_id = s.user_id
       AND s.state = c.state
       AND engagement_clock(@clock::text, s.last_activity_at, s.created_at, s.remind_at,
                            s.state_entered_at, s.state_changed_xact_at) + @wait::interval <= @as_of::timestamptz
 RETURNING s.user_id, c.state AS from_state, c.due, c.opted_out, c.destination, c.destination_jid, c.key
), queued AS (
    INSERT INTO engagement_message_queue
           (user_id, message_type, message_key, destination, destination_jid,
            scheduled_for, idempotency_key, period_start, replay_until, job_run_id)
    SELECT user_id, @message_type, @message_key, destination, destination_jid,
           least(@as_of::timestamptz, now()), key,
           coalesce(@period_start::timestamptz, due), coalesce(@replay_until::timestamptz, due), @run_id::bigint
      FROM moved
     WHERE @queue::boolean AND NOT opted_out AND destination_jid IS NOT NULL
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING idempotency_key AS k
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, from_state, @to_state, @trigger, @run_id::bigint FROM moved
), would AS MATERIALIZED (
    -- A dry run's users: every one the move would take, and, with @queue,
    -- whether their message's key is not taken yet.
    SELECT @queue::boolean AND NOT EXISTS (SELECT FROM engagement_message_queue q
                                            WHERE q.idempotency_key = c.key) AS queues
      FROM chunk c
     WHERE @dry_run::boolean
)
SELECT count(*)::int AS candidates,
       ((SELECT count(*) FROM moved) + (SELECT count(*) FROM would))::int AS moved,
       ((SELECT count(*) FROM queued) + (SELECT count(*) FROM would WHERE queues))::int AS queued,
       CASE WHEN @dry_run::boolean THEN 0 -- no row is tried
            ELSE count(*) - (SELECT count(*) FROM locked) END::int AS locked,
       0 AS opted_out,
       0 AS no_destination,
       0 AS held_out, -- holds out nobody: the holdout is the goodbye's (daily_inactivity_14d.sql)
       -- With debug logs on, the keys that were already taken.
       CASE WHEN @log_duplicates::boolean
            THEN ARRAY(SELECT m.key FROM moved m
                        WHERE @queue::boolean AND NOT m.opted_out AND m.destination_jid IS NOT NULL
                       EXCEPT SELECT k FROM queued)
            ELSE '{}'::text[] END AS duplicate_keys
  FROM chunk
