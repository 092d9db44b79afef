-- Dry run of step goodbye_timeout (goodbye_sent -goodbye_timeout-> dormant):
-- counts, writing nothing, the users daily_goodbye_timeout.sql would move,
-- over the whole table: one row per skip reason ('' for the users it would
-- move, 'opted_out') with how many users (and 0: the step queues nothing).
SELECT c.skip_reason, count(*)::int, 0
  FROM (SELECT s.user_id,
               CASE WHEN p.reengagement_opt_out THEN 'opted_out' ELSE '' END AS skip_reason
          FROM user_engagement_states s
          JOIN user_profiles p ON p.user_id = s.user_id
         WHERE s.state = @from_state
           AND (s.goodbye_expires_at <= @as_of
                OR (s.goodbye_expires_at IS NULL AND s.goodbye_sent_at <= @goodbye_sent_before))
           AND (@shard_count::int = 1
                OR ((hashtextextended(s.user_id::text, 0) & 9223372036854775807) % @shard_count::int) = @shard_index::int)
       ) AS c
 GROUP BY c.skip_reason
