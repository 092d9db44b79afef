-- The console finds a user by phone number or JID (a support request
-- carries a number, not a UUID): without an index that is a scan of every
-- profile, 290–360 ms at 1,000,000 users on 2 cores, past the console's
-- 300 ms. Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot
-- run in a transaction): on the bot's database the bot keeps writing while
-- it builds. group_jid's index is migration 47's.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_user_profiles_whatsapp_jid_idx
    ON user_profiles (whatsapp_jid) WHERE whatsapp_jid IS NOT NULL;
