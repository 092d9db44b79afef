-- The console's users by state over 8 weeks (the moves since a week's end,
-- with their states) and the goodbye funnel's outcomes (the moves out of
-- goodbye_sent), from the index alone.
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_state_transitions_created_idx
    ON engagement_state_transitions (created_at) INCLUDE (from_state, to_state, trigger, user_id, id);
