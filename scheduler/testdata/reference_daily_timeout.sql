-- The daily job's goodbye_timeout step as one statement over every user.
-- Named arguments: as_of, run_id.
WITH moved AS (
    UPDATE user_engagement_states s SET state = 'dormant', updated_at = now()
      FROM user_profiles p
     WHERE p.user_id = s.user_id AND s.state = 'goodbye_sent' AND NOT p.reengagement_opt_out
       AND (s.goodbye_expires_at <= @as_of
            OR (s.goodbye_expires_at IS NULL AND s.goodbye_sent_at <= @as_of::timestamptz - interval '48 hours'))
 RETURNING s.user_id
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, 'goodbye_sent', 'dormant', 'goodbye_timeout', @run_id::bigint FROM moved
)
SELECT count(*) FROM moved
