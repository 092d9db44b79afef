-- The users whose WhatsApp JID is @jid (Meta's user_preferences name a
-- user by their wa_id): the profiles' JID index (migration 46).
SELECT user_id::text AS user_id FROM user_profiles WHERE whatsapp_jid = @jid::text ORDER BY user_id
