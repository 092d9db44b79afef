DROP INDEX CONCURRENTLY IF EXISTS transactions_created_at_idx;
