-- The daily job's reminder_due step as one statement over every user.
-- Named arguments: as_of, run_id.
WITH moved AS (
    UPDATE user_engagement_states s SET state = 'dormant', updated_at = now()
      FROM user_profiles p
     WHERE p.user_id = s.user_id AND s.state = 'remind_later' AND NOT p.reengagement_opt_out
       AND s.remind_at <= @as_of
 RETURNING s.user_id
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, 'remind_later', 'dormant', 'reminder_due', @run_id::bigint FROM moved
)
SELECT count(*) FROM moved
