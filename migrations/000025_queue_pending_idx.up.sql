-- What queue-process claims: due pending messages, oldest first.
--
-- Migration 1 creates the table without it, so that on the bot's database,
-- whose engagement_message_queue is the bot's and already holds rows, the
-- index is built CONCURRENTLY: the bot keeps writing while it builds. A
-- database that has it already (from an earlier migration 1) keeps it. A
-- file of its own, since CONCURRENTLY cannot run in a transaction.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_message_queue_pending_idx
    ON engagement_message_queue (scheduled_for) WHERE status = 'pending';
