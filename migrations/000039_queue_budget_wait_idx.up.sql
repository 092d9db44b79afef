-- The messages waiting on the send budget, in the order they wait: a claim
-- over the budget counts them to give the next one its place after them,
-- and engagementctl status and the console show them.
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_message_queue_budget_wait_idx
    ON engagement_message_queue (scheduled_for) WHERE status = 'pending' AND deferred_reason = 'budget';
