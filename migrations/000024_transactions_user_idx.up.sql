-- A user's transactions in a window (the weekly review's count).
--
-- Migration 1 creates the table without it, so that on the bot's database,
-- whose transactions is the bot's and already holds rows, the index is built
-- CONCURRENTLY: the bot keeps writing while it builds. A database that has
-- it already (from an earlier migration 1) keeps it. A file of its own,
-- since CONCURRENTLY cannot run in a transaction.
CREATE INDEX CONCURRENTLY IF NOT EXISTS transactions_user_created_idx
    ON transactions (user_id, created_at);
