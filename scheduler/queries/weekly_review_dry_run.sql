-- Dry run of step weekly_review: counts, writing nothing, the users
-- weekly_review.sql would review, over the whole table: one row per skip
-- reason ('' for the users it would review, 'opted_out', 'no_destination')
-- with how many users, and how many of them already have the week's review
-- key (user_id || @key_suffix) taken. The users: in @states (active or
-- help_flow), with a transaction or bot activity in (@window_start, @as_of].
WITH window_transactions AS (
    SELECT user_id, count(*)::int AS transactions
      FROM transactions
     WHERE created_at > @window_start AND created_at <= @as_of
     GROUP BY user_id
)
SELECT c.skip_reason, count(*)::int,
       count(*) FILTER (WHERE EXISTS (
           SELECT 1 FROM engagement_message_queue q
            WHERE q.idempotency_key = c.user_id::text || @key_suffix::text))::int,
       0 -- holds out nobody
  FROM (SELECT s.user_id,
               CASE WHEN p.reengagement_opt_out THEN 'opted_out'
                    WHEN route.destination_jid IS NULL THEN 'no_destination'
                    ELSE '' END AS skip_reason
          FROM user_engagement_states s
          JOIN user_profiles p ON p.user_id = s.user_id
         CROSS JOIN LATERAL engagement_route(p.preferred_destination, p.group_jid, p.whatsapp_jid) route
          LEFT JOIN window_transactions w ON w.user_id = s.user_id
         WHERE s.state = ANY(@states::text[])
           AND (w.user_id IS NOT NULL
                OR (s.last_activity_at > @window_start AND s.last_activity_at <= @as_of))
           AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
       ) AS c
 GROUP BY c.skip_reason
