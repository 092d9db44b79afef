-- Dry run of step inactivity_14d (active -inactivity_14d-> goodbye_sent):
-- counts, writing nothing, the users daily_inactivity_14d.sql would move,
-- over the whole table: one row per skip reason ('' for the users it would
-- move, 'opted_out', 'no_destination') with how many users, how many of
-- those it would queue for already have the goodbye's key (user_id ||
-- @key_suffix) taken, and how many it would hold out (nothing queued: see
-- the holdout in daily_inactivity_14d.sql).
SELECT c.skip_reason, count(*)::int,
       count(*) FILTER (WHERE NOT c.held_out AND EXISTS (
           SELECT 1 FROM engagement_message_queue q
            WHERE q.idempotency_key = c.user_id::text || @key_suffix::text))::int,
       count(*) FILTER (WHERE c.held_out)::int
  FROM (SELECT s.user_id,
               NOT p.reengagement_opt_out AND route.destination_jid IS NOT NULL
               AND engagement_holdout_bucket(@holdout_salt::text, s.user_id) < @holdout_basis_points::int AS held_out,
               CASE WHEN p.reengagement_opt_out THEN 'opted_out'
                    WHEN route.destination_jid IS NULL THEN 'no_destination'
                    ELSE '' END AS skip_reason
          FROM user_engagement_states s
          JOIN user_profiles p ON p.user_id = s.user_id
         CROSS JOIN LATERAL engagement_route(p.preferred_destination, p.group_jid, p.whatsapp_jid) route
         WHERE s.state = ANY(@from_states::text[])
           AND engagement_inactivity_due(@as_of::timestamptz, @inactivity::interval, s.last_activity_at, s.created_at,
                                         s.goodbye_sent_at, s.goodbye_expires_at)
           AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
       ) AS c
 GROUP BY c.skip_reason
