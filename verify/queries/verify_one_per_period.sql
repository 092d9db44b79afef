-- Checks one_goodbye_per_day and one_review_per_week: no user has two
-- @message_type messages (any status but cancelled) for one period: the
-- period_start stored when the message was queued or, for a message
-- without one (no key, or queued by the bot), the start of the @unit ('day'
-- or 'week', ISO) of its scheduled_for in UTC. Examples print the period
-- with @format ('YYYY-MM-DD', 'IYYY-"W"IW') and count @plural ('goodbyes').
-- It reads the rows, not the unique index, so it holds even where that
-- index is gone. See verify_goodbye_queued.sql for the statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT user_id::text || ' ' || to_char(period AT TIME ZONE 'UTC', @format::text) || ' (' || count(*) || ' ' || @plural::text || ')', false
      FROM (SELECT user_id,
                   coalesce(period_start, date_trunc(@unit::text, scheduled_for AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS period
              FROM engagement_message_queue
             WHERE message_type = @message_type::text AND status <> 'cancelled') m
     GROUP BY user_id, period
    HAVING count(*) > 1
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
