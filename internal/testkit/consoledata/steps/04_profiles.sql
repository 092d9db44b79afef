-- The users' profiles. Every profile reaches its user on WhatsApp
-- individually (no group routing); the zone is set for 12% of users, so
-- quiet hours hold some messages until 09:00 in other zones.
INSERT INTO user_profiles (user_id, reengagement_opt_out, preferred_destination, whatsapp_jid, group_jid, locale,
                           timezone, created_at)
SELECT user_id, opt, 'individual', jid, NULL, locale, tz, created_at
  FROM consoledata.users
 ORDER BY user_id
