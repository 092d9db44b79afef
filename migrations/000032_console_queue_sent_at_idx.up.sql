-- The console's send latency and hourly throughput: the messages sent in a
-- window.
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_message_queue_sent_at_idx
    ON engagement_message_queue (sent_at) WHERE status = 'sent';
