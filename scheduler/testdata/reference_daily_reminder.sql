-- The daily job's reminder_due step as one statement over every user
-- (opted-out users' timers complete too; no reminder: the default).
-- Named arguments: as_of, run_id.
WITH moved AS (
    UPDATE user_engagement_states s SET state = 'dormant', updated_at = now(), state_entered_at = @as_of
     WHERE s.state = 'remind_later' AND s.remind_at <= @as_of::timestamptz
 RETURNING s.user_id
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, 'remind_later', 'dormant', 'reminder_due', @run_id::bigint FROM moved
)
SELECT count(*) FROM moved
