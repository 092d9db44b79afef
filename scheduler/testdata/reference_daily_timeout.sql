-- The daily job's goodbye_timeout step as one statement over every user:
-- 48 h after the goodbye was delivered (or its last attempt, in doubt) ->
-- dormant; failed for good or cancelled -> active (goodbye_undelivered);
-- no message, or opted out: past goodbye_expires_at (goodbye_sent_at +
-- 48 h without it) -> dormant.
-- Named arguments: as_of, run_id.
WITH due AS (
    SELECT s.user_id,
           CASE WHEN p.reengagement_opt_out OR q.status IS NULL
                THEN CASE WHEN s.goodbye_expires_at <= @as_of
                            OR (s.goodbye_expires_at IS NULL AND s.goodbye_sent_at <= @as_of::timestamptz - interval '48 hours')
                          THEN 'dormant' END
                WHEN q.status = 'sent'
                THEN CASE WHEN q.sent_at <= @as_of::timestamptz - interval '48 hours' THEN 'dormant' END
                WHEN q.status = 'failed' AND starts_with(coalesce(q.error_message, ''), 'outcome unknown')
                THEN CASE WHEN coalesce((SELECT max(l.last_attempt_at) FROM engagement_processed_messages l
                                          WHERE l.message_id = q.id), s.goodbye_sent_at)
                               <= @as_of::timestamptz - interval '48 hours' THEN 'dormant' END
                WHEN q.status IN ('failed', 'cancelled') THEN 'active'
           END AS to_state
      FROM user_engagement_states s
      JOIN user_profiles p ON p.user_id = s.user_id
      LEFT JOIN engagement_message_queue q
        ON q.idempotency_key = s.user_id::text || ':goodbye_sent:' || to_char(s.goodbye_sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
     WHERE s.state = 'goodbye_sent'
), moved AS (
    UPDATE user_engagement_states s SET state = d.to_state, updated_at = now()
      FROM due d
     WHERE d.user_id = s.user_id AND d.to_state IS NOT NULL
 RETURNING s.user_id, d.to_state
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, 'goodbye_sent', to_state,
           CASE to_state WHEN 'dormant' THEN 'goodbye_timeout' ELSE 'goodbye_undelivered' END, @run_id::bigint
      FROM moved
)
SELECT count(*) FROM moved
