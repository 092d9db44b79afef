-- The console's goodbye funnel: the goodbyes and the returns (one trigger
-- each) of the last 8 weeks, with their users and ids, from the index
-- alone.
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_state_transitions_trigger_created_idx
    ON engagement_state_transitions (trigger, created_at) INCLUDE (user_id, id);
