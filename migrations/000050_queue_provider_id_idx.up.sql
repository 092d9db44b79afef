-- engagement_receipt (migration 49) finds a message by its provider id
-- for every receipt WhatsApp sends (up to three a message): without an
-- index, a scan of the whole queue each. Built CONCURRENTLY, in a file of
-- its own, as migration 46: the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_message_queue_provider_id_idx
    ON engagement_message_queue (provider_message_id) WHERE provider_message_id IS NOT NULL;
