-- The users in @states (the weekly review's: active, help_flow) with a transaction or bot activity
-- (last_activity_at) in the window (@window_start, @as_of], not opted out,
-- one row each: user_id, state, transactions (their count in the window),
-- destination and destination_jid as engagement_route (migration 40)
-- routes them ('' when the user has neither JID), locale. The window's transactions are counted
-- per user once, in one scan.
WITH window_transactions AS (
    SELECT user_id, count(*)::int AS transactions
      FROM transactions
     WHERE created_at > @window_start AND created_at <= @as_of
     GROUP BY user_id
)
SELECT s.user_id::text AS user_id, s.state, coalesce(w.transactions, 0) AS transactions,
       route.destination, coalesce(route.destination_jid, '') AS destination_jid,
       p.locale
  FROM user_engagement_states s
  JOIN user_profiles p ON p.user_id = s.user_id
 CROSS JOIN LATERAL engagement_route(p.preferred_destination, p.group_jid, p.whatsapp_jid) route
  LEFT JOIN window_transactions w ON w.user_id = s.user_id
 WHERE s.state = ANY(@states::text[])
   AND NOT p.reengagement_opt_out
   AND (w.user_id IS NOT NULL
        OR (s.last_activity_at > @window_start AND s.last_activity_at <= @as_of))
