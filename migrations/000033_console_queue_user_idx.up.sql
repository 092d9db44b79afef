-- The console's user page: one user's messages.
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_message_queue_user_idx
    ON engagement_message_queue (user_id, created_at);
