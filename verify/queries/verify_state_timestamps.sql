-- Check state_timestamps: goodbye_sent users have goodbye_sent_at and
-- remind_later users have remind_at; without them the daily job can never
-- move the user on. See verify_goodbye_queued.sql for the statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT s.user_id::text || ' (' || s.state || ' without ' ||
           CASE s.state WHEN 'goodbye_sent' THEN 'goodbye_sent_at' ELSE 'remind_at' END || ')', false
      FROM user_engagement_states s
     WHERE (s.state = 'goodbye_sent' AND s.goodbye_sent_at IS NULL)
        OR (s.state = 'remind_later' AND s.remind_at IS NULL)
)
SELECT count(*) FILTER (WHERE NOT exempt),
       count(*) FILTER (WHERE exempt),
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}')
  FROM found
