-- Check no_goodbye_to_holdout: no user the daily job held out of a goodbye
-- (their @trigger log row says holdout, migration 55) has a goodbye
-- (@message_type) of that cycle in the queue, in any status but cancelled:
-- a held-out user is sent nothing, whoever queued it. A goodbye is the
-- cycle's when its period_start is the cycle's UTC day, or when it was
-- queued without one (or for another day: engagementctl enqueue, POST
-- /api/messages) after the held-out move and before the user's next goodbye
-- move. The day is the as-of of the run that logged the row
-- (engagement_job_runs) or, once cleanup has pruned the run, the day the
-- row was written.
--
-- Like every verify_*.sql: found lists the suspicious rows as (example,
-- exempt); the statement returns how many are violations, how many exempt,
-- and up to @max_examples examples of the violations, sorted.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT h.user_id::text || ' held out on ' || to_char(d.day AT TIME ZONE 'UTC', 'YYYY-MM-DD')
           || ', goodbye ' || q.status, false
      FROM engagement_state_transitions h
      LEFT JOIN engagement_job_runs r ON r.id = h.job_run_id
     CROSS JOIN LATERAL (
           SELECT date_trunc('day', coalesce(r.as_of, h.created_at) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS day
     ) d
      JOIN engagement_message_queue q
        ON q.user_id = h.user_id AND q.message_type = @message_type::text AND q.status <> 'cancelled'
       AND (q.period_start = d.day
            OR q.created_at >= h.created_at
               AND NOT EXISTS (SELECT FROM engagement_state_transitions n
                                WHERE n.user_id = h.user_id AND n.trigger = @trigger::text
                                  AND n.id > h.id AND n.created_at <= q.created_at))
     WHERE h.holdout AND h.trigger = @trigger::text
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
