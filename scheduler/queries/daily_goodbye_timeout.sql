-- Step goodbye_timeout: goodbye_sent -goodbye_timeout-> dormant.
--
-- Moves the users of one chunk of user_engagement_states (the rows whose
-- ctid lies in [@first, @end)) who are in @from_state and whose goodbye
-- went unanswered: goodbye_expires_at has come (@as_of), or, for rows
-- without it, goodbye_sent_at is 48 h old (@goodbye_sent_before). Each is
-- moved to @to_state and the move logged (@trigger, run @run_id) in the
-- same statement. @from_state, @to_state and @trigger come from the state
-- machine's table (statemachine.Next); step_test.go checks this file
-- against it. Nothing is queued.
--
-- Opted-out users are never touched. Only the run's shard (@shard_index of
-- @shard_count) is seen: a @shard_count of 1 is every user.
--
-- Returns the chunk's counters: candidates, moved, queued (always 0),
-- locked (rows the bot held: skipped, a later run moves them), opted out,
-- no destination (always 0).
WITH chunk AS MATERIALIZED (
    -- OFFSET 0 keeps the profile a primary-key probe per user.
    SELECT s.user_id, p.skip_reason
      FROM user_engagement_states s
      CROSS JOIN LATERAL (
          SELECT CASE WHEN p.reengagement_opt_out THEN 'opted_out' ELSE '' END AS skip_reason
            FROM user_profiles p
           WHERE p.user_id = s.user_id
          OFFSET 0
      ) p
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state = @from_state
       AND (s.goodbye_expires_at <= @as_of
            OR (s.goodbye_expires_at IS NULL AND s.goodbye_sent_at <= @goodbye_sent_before))
       AND (@shard_count::int = 1
            OR ((hashtextextended(s.user_id::text, 0) & 9223372036854775807) % @shard_count::int) = @shard_index::int)
), locked AS MATERIALIZED (
    -- Rows the bot holds are skipped rather than waited for, and counted.
    SELECT s.user_id
      FROM user_engagement_states s
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state = @from_state
       AND (s.goodbye_expires_at <= @as_of
            OR (s.goodbye_expires_at IS NULL AND s.goodbye_sent_at <= @goodbye_sent_before))
       AND s.user_id IN (SELECT user_id FROM chunk WHERE skip_reason = '')
       FOR NO KEY UPDATE SKIP LOCKED
), moved AS (
    -- Re-checks what chunk checked: a user changed in between is not moved.
    UPDATE user_engagement_states s
       SET state = @to_state, updated_at = now()
      FROM chunk c
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.user_id IN (SELECT user_id FROM locked) AND c.user_id = s.user_id
       AND s.state = @from_state
       AND (s.goodbye_expires_at <= @as_of
            OR (s.goodbye_expires_at IS NULL AND s.goodbye_sent_at <= @goodbye_sent_before))
 RETURNING s.user_id
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, @from_state, @to_state, @trigger, @run_id::bigint FROM moved
)
SELECT count(*)::int,
       (SELECT count(*) FROM moved)::int,
       0,
       (count(*) FILTER (WHERE skip_reason = '') - (SELECT count(*) FROM locked))::int,
       count(*) FILTER (WHERE skip_reason = 'opted_out')::int,
       0
  FROM chunk
