-- The users a phone number or a JID finds (POST /users), most recently
-- active first: those whose WhatsApp JID's user part (before '@' and any
-- ':device') is one of @numbers (the number's forms, digits only), and,
-- for a whole JID (@jid; '' for none), those whose JID or group JID it is.
-- The JID leaves the database as its last four digits only. user_profiles
-- is the bot's table, without an index on the JID: one scan of it.
SELECT p.user_id::text, coalesce(s.state, ''), s.last_activity_at,
       coalesce(right(regexp_replace(split_part(p.whatsapp_jid, '@', 1), '[^0-9]', '', 'g'), 4), '') AS jid_last4,
       coalesce(p.preferred_destination, '')
  FROM user_profiles p
  LEFT JOIN user_engagement_states s ON s.user_id = p.user_id
 WHERE split_part(split_part(p.whatsapp_jid, '@', 1), ':', 1) = ANY (@numbers::text[])
    OR (@jid::text <> '' AND (lower(p.whatsapp_jid) = @jid OR lower(p.group_jid) = @jid))
 ORDER BY s.last_activity_at DESC NULLS LAST, p.user_id
 LIMIT @limit;
