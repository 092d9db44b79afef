-- The console's weekly reviews: the reviews of each ISO week, by the period
-- they cover, with their status (an index-only count).
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_message_queue_type_period_idx
    ON engagement_message_queue (message_type, period_start) INCLUDE (status);
