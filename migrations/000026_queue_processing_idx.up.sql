-- Messages in flight, for the recovery of abandoned claims.
--
-- Migration 3 builds it on the scheduler's own queue only, so that on the
-- bot's database, whose queue is the bot's and already holds rows, it is
-- built here, CONCURRENTLY: the bot keeps writing while it builds. A
-- database that has it already keeps it. A migration of
-- its own, since CONCURRENTLY cannot run in a transaction.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_message_queue_processing_idx ON engagement_message_queue (claimed_until) WHERE status = 'processing';
