-- Check state_timestamps: every user waiting on a timer has the time it
-- counts from: goodbye_sent_at in @goodbye_states (goodbye_timeout's), and
-- remind_at in a state whose timer's clock is remind_at (@timer_states,
-- @timer_clocks: reminder_due's remind_later); without it the daily job can
-- never move the user on. See verify_goodbye_queued.sql for the
-- statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT s.user_id::text || ' (' || s.state || ' without ' ||
           CASE WHEN s.state = ANY(@goodbye_states::text[]) THEN 'goodbye_sent_at' ELSE 'remind_at' END || ')', false
      FROM user_engagement_states s
     WHERE (s.state = ANY(@goodbye_states::text[]) AND s.goodbye_sent_at IS NULL)
        OR (s.remind_at IS NULL
            AND s.state IN (SELECT t.state FROM unnest(@timer_states::text[], @timer_clocks::text[]) AS t(state, clock)
                             WHERE t.clock = 'remind_at'))
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
