-- The daily job's goodbye_timeout step as one statement over every user:
-- 48 h after the goodbye was delivered (or its last attempt, in doubt) ->
-- dormant; failed for good or cancelled -> active (goodbye_undelivered,
-- goodbye_expires_at = as-of); no message, or opted out: past
-- goodbye_expires_at (goodbye_sent_at + 48 h without it) -> dormant. Who is
-- due is migration 29's engagement_goodbye_due, as for the job.
-- Named arguments: as_of, run_id.
WITH due AS (
    SELECT s.user_id,
           engagement_goodbye_due(@as_of::timestamptz, interval '48 hours',
                                  p.reengagement_opt_out, s.goodbye_sent_at, s.goodbye_expires_at,
                                  q.status, q.in_doubt, q.sent_at, q.delivered_at,
                                  (SELECT max(l.last_attempt_at) FROM engagement_processed_messages l
                                    WHERE l.message_id = q.id)) AS verdict
      FROM user_engagement_states s
      JOIN user_profiles p ON p.user_id = s.user_id
      LEFT JOIN engagement_message_queue q
        ON q.idempotency_key = s.user_id::text || ':goodbye_sent:' || to_char(s.goodbye_sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
     WHERE s.state = 'goodbye_sent'
), moved AS (
    UPDATE user_engagement_states s
       SET state = CASE d.verdict WHEN 'timed_out' THEN 'dormant' ELSE 'active' END, updated_at = now(), state_entered_at = @as_of,
           goodbye_expires_at = CASE d.verdict WHEN 'undelivered' THEN @as_of::timestamptz ELSE s.goodbye_expires_at END
      FROM due d
     WHERE d.user_id = s.user_id AND d.verdict IS NOT NULL
 RETURNING s.user_id, s.state AS to_state
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, 'goodbye_sent', to_state,
           CASE to_state WHEN 'dormant' THEN 'goodbye_timeout' ELSE 'goodbye_undelivered' END, @run_id::bigint
      FROM moved
)
SELECT count(*) FROM moved
