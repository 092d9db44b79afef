-- Step reminder_due: remind_later -reminder_due-> dormant.
--
-- Moves the users of one chunk of user_engagement_states (the rows whose
-- ctid lies in [@first, @end)) who are in @from_state and whose remind_at
-- has come at @as_of (engagement_reminder_due, migration 29, the definition
-- verify's no_user_stuck uses too) to @to_state, and logs each move
-- (@trigger, run @run_id) in the same statement. @from_state, @to_state
-- and @trigger come from the state machine's table
-- (statemachine.Transitions); step_test.go runs the step and checks its
-- outcome against the table.
--
-- With @send_reminder (engagement-daily --send-reminder; off by default,
-- when the user goes dormant silently, AC-5.1.3), each moved user who has
-- not opted out and has a destination also gets the reminder their "remind
-- me later" asked for, queued (@message_type, @message_key) under the key
-- user_id || @key_infix || remind_at in Unix milliseconds
-- ({userId}:reminder:{remind_at}), in the same statement. An opted-out
-- user's timer completes silently: they go dormant, never messaged.
-- Only the run's shard (@shard_index of @shard_count) is seen: a
-- @shard_count of 1 is every user.
--
-- Returns the chunk's counters: candidates, moved, queued, locked (rows
-- the bot held: skipped, a later run moves them), opted out and no
-- destination (always 0: every user's timer completes; a reminder that
-- cannot be queued is simply not queued).
WITH chunk AS MATERIALIZED (
    -- OFFSET 0 keeps the profile a primary-key probe per user.
    SELECT s.user_id, s.remind_at, p.opted_out, p.destination, p.destination_jid
      FROM user_engagement_states s
      CROSS JOIN LATERAL (
          SELECT p.reengagement_opt_out AS opted_out,
                 CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                      THEN 'group' ELSE 'individual' END AS destination,
                 nullif(btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                                   THEN p.group_jid ELSE p.whatsapp_jid END), '') AS destination_jid
            FROM user_profiles p
           WHERE p.user_id = s.user_id
          OFFSET 0
      ) p
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state = @from_state AND engagement_reminder_due(@as_of::timestamptz, s.remind_at)
       AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
), locked AS MATERIALIZED (
    -- Rows the bot holds are skipped rather than waited for, and counted.
    SELECT s.user_id
      FROM user_engagement_states s
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state = @from_state AND engagement_reminder_due(@as_of::timestamptz, s.remind_at)
       AND s.user_id IN (SELECT user_id FROM chunk)
       FOR NO KEY UPDATE SKIP LOCKED
), moved AS (
    -- Re-checks what chunk checked: a user changed in between is not moved.
    UPDATE user_engagement_states s
       SET state = @to_state, updated_at = now()
      FROM chunk c
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.user_id IN (SELECT user_id FROM locked) AND c.user_id = s.user_id
       AND s.state = @from_state AND engagement_reminder_due(@as_of::timestamptz, s.remind_at)
 RETURNING s.user_id, c.remind_at, c.opted_out, c.destination, c.destination_jid
), queued AS (
    INSERT INTO engagement_message_queue
           (user_id, message_type, message_key, destination, destination_jid,
            scheduled_for, idempotency_key, period_start, replay_until, job_run_id)
    SELECT user_id, @message_type, @message_key, destination, destination_jid,
           least(@as_of::timestamptz, now()),
           user_id::text || @key_infix::text || floor(extract(epoch FROM remind_at) * 1000)::bigint::text,
           remind_at, remind_at, @run_id::bigint
      FROM moved
     WHERE @send_reminder::boolean AND NOT opted_out AND destination_jid IS NOT NULL
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING idempotency_key AS k
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, @from_state, @to_state, @trigger, @run_id::bigint FROM moved
)
SELECT count(*)::int,
       (SELECT count(*) FROM moved)::int,
       (SELECT count(*) FROM queued)::int,
       (count(*) - (SELECT count(*) FROM locked))::int,
       0,
       0,
       -- With debug logs on, the reminder keys that were already taken.
       CASE WHEN @log_duplicates::boolean
            THEN ARRAY(SELECT m.user_id::text || @key_infix::text || floor(extract(epoch FROM m.remind_at) * 1000)::bigint::text
                         FROM moved m
                        WHERE @send_reminder::boolean AND NOT m.opted_out AND m.destination_jid IS NOT NULL
                       EXCEPT SELECT k FROM queued)
            ELSE '{}'::text[] END
  FROM chunk
