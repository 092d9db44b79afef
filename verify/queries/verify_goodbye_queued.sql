-- Check goodbye_queued: every user in @goodbye_states (goodbye_sent, the
-- goodbye timer's, scheduler.DeadlineArgs) whose latest logged transition
-- put them there, and did not hold them out (holdout, migration 55: see
-- verify_no_goodbye_to_holdout.sql), has a goodbye queued (any status) for
-- the UTC day of goodbye_sent_at, as its period_start says (@message_type
-- is the goodbye kind's). Exempt: users with no such log row (the bot or
-- an import set the state), no goodbye_sent_at (see
-- verify_state_timestamps.sql), or a goodbye day that ended before @cutoff
-- (as-of minus the retention: cleanup may have deleted it).
--
-- Like every verify_*.sql: found lists the suspicious rows as (example,
-- exempt); the statement returns how many are violations, how many exempt,
-- and up to @max_examples examples of the violations, sorted.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT s.user_id::text,
           NOT coalesce(l.to_state = ANY(@goodbye_states::text[]), false)
           OR s.goodbye_sent_at IS NULL
           OR ((s.goodbye_sent_at AT TIME ZONE 'UTC')::date + 1)::timestamp AT TIME ZONE 'UTC' < @cutoff
      FROM user_engagement_states s
      LEFT JOIN LATERAL (
           SELECT l.to_state, l.holdout FROM engagement_state_transitions l
            WHERE l.user_id = s.user_id
            ORDER BY l.id DESC LIMIT 1
      ) l ON true
     WHERE s.state = ANY(@goodbye_states::text[])
       AND NOT coalesce(l.holdout, false)
       AND NOT EXISTS (
           SELECT 1 FROM engagement_message_queue q
            WHERE q.user_id = s.user_id AND q.message_type = @message_type::text
              AND q.period_start = date_trunc('day', s.goodbye_sent_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
