-- The daily job's reminder_due step as one statement over every user
-- (opted-out users' timers complete too; no reminder: the default).
-- Named arguments: as_of, run_id.
WITH moved AS (
    UPDATE user_engagement_states s SET state = 'dormant', updated_at = now()
     WHERE s.state = 'remind_later' AND engagement_reminder_due(@as_of::timestamptz, s.remind_at)
 RETURNING s.user_id
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, 'remind_later', 'dormant', 'reminder_due', @run_id::bigint FROM moved
)
SELECT count(*) FROM moved
