-- Expired goodbyes: only the users in goodbye_sent.
--
-- Migration 1 creates the table without it, so that on the bot's database,
-- whose user_engagement_states is the bot's and already holds rows, the
-- index is built CONCURRENTLY: the bot keeps writing while it builds. A
-- database that has it already (from an earlier migration 1) keeps it. A
-- file of its own, since CONCURRENTLY cannot run in a transaction.
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_engagement_states_goodbye_expires_idx
    ON user_engagement_states (goodbye_expires_at) WHERE state = 'goodbye_sent';
