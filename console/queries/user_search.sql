-- The users a phone number or a JID finds (POST /users), most recently
-- active first: those whose WhatsApp JID or group JID is one of @jids (a
-- number's forms as <digits>@s.whatsapp.net, or a group's JID). Plain
-- equality, on the JID indexes of migrations 46 and 47 (a bitmap OR of
-- the two). The JID leaves the database as its last four digits only. A
-- profile without a state row has no last activity.
SELECT p.user_id::text AS user_id, coalesce(s.state, '') AS state, s.last_activity_at,
       coalesce(right(regexp_replace(split_part(p.whatsapp_jid, '@', 1), '[^0-9]', '', 'g'), 4), '') AS jid_last4,
       coalesce(p.preferred_destination, '') AS destination
  FROM user_profiles p
  LEFT JOIN user_engagement_states s ON s.user_id = p.user_id
 WHERE p.whatsapp_jid = ANY (@jids::text[]) OR p.group_jid = ANY (@jids::text[])
 ORDER BY s.last_activity_at DESC NULLS LAST, p.user_id
 LIMIT @limit;
