-- The console's users by state over 8 weeks: the users who arrived since a
-- week's end.
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_engagement_states_created_idx
    ON user_engagement_states (created_at);
