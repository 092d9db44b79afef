-- Check instants_plausible: no user's clock lies where no move could have
-- put it. A last activity more than @skew past the later of the database
-- clock and @as_of (a bot's timestamp in the wrong unit: the year 58874)
-- keeps the user from every goodbye, since activity never moves back; a
-- remind_at more than @remind_wait (the remind-later move's wait) past
-- that never comes due; an infinite timestamp in any of the user's clocks
-- is either. engagement_fire refuses such instants (EN005, migration 45);
-- this finds those written before it, or by hand. Each example names the
-- user and the column. See verify_goodbye_queued.sql for the statement's
-- shape.
WITH bound AS (
    SELECT greatest(now(), @as_of::timestamptz) + @skew::interval AS latest
), found (example, exempt) AS MATERIALIZED (
    SELECT s.user_id::text || ' (' ||
           CASE WHEN NOT isfinite(s.last_activity_at) OR s.last_activity_at > b.latest THEN 'last_activity_at '
                WHEN NOT isfinite(s.remind_at) OR s.remind_at > b.latest + @remind_wait::interval THEN 'remind_at '
                WHEN NOT isfinite(s.goodbye_sent_at) THEN 'goodbye_sent_at '
                WHEN NOT isfinite(s.goodbye_expires_at) THEN 'goodbye_expires_at '
                ELSE 'state_entered_at '
           END || 'out of range)', false
      FROM user_engagement_states s, bound b
     WHERE NOT isfinite(s.last_activity_at) OR s.last_activity_at > b.latest
        OR NOT isfinite(s.remind_at) OR s.remind_at > b.latest + @remind_wait::interval
        OR NOT isfinite(s.goodbye_sent_at) OR NOT isfinite(s.goodbye_expires_at)
        OR NOT isfinite(s.state_entered_at)
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
