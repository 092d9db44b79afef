-- The due messages of one type, oldest first: queue-process --kind-priority
-- finds the types pending by a loose scan of it and takes each type's
-- oldest due by a probe of its own (claim.sql), so that a claim in kind
-- order reads what its batch holds, never the whole backlog.
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_message_queue_pending_type_idx
    ON engagement_message_queue (message_type, scheduled_for) WHERE status = 'pending';
