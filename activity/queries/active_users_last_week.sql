-- The users in state active or help_flow with a transaction or bot activity
-- (last_activity_at) in the window (@window_start, @as_of], not opted out,
-- one row each: user_id, state, transactions (their count in the window),
-- destination and destination_jid as the contract routes them (destination
-- 'group' uses group_jid when set, else 'individual' and whatsapp_jid; ''
-- when the user has neither), locale. The window's transactions are counted
-- per user once, in one scan.
WITH window_transactions AS (
    SELECT user_id, count(*)::int AS transactions
      FROM transactions
     WHERE created_at > @window_start AND created_at <= @as_of
     GROUP BY user_id
)
SELECT s.user_id::text, s.state, coalesce(w.transactions, 0) AS transactions,
       CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
            THEN 'group' ELSE 'individual' END AS destination,
       coalesce(btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                           THEN p.group_jid ELSE p.whatsapp_jid END), '') AS destination_jid,
       p.locale
  FROM user_engagement_states s
  JOIN user_profiles p ON p.user_id = s.user_id
  LEFT JOIN window_transactions w ON w.user_id = s.user_id
 WHERE s.state IN ('active', 'help_flow')
   AND NOT p.reengagement_opt_out
   AND (w.user_id IS NOT NULL
        OR (s.last_activity_at > @window_start AND s.last_activity_at <= @as_of))
