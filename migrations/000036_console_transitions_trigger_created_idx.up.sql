-- The console's goodbye funnel: the goodbyes (one trigger) of the last 8
-- weeks.
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_state_transitions_trigger_created_idx
    ON engagement_state_transitions (trigger, created_at);
