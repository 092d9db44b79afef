-- The weekly review aggregates the transactions of the last 7 days: an index
-- on created_at keeps that a range scan however long the history grows.
-- CONCURRENTLY, so adding it to a live database does not block the bot's
-- writes; that is why it is a migration of its own.
CREATE INDEX CONCURRENTLY IF NOT EXISTS transactions_created_at_idx ON transactions (created_at);
