DROP INDEX CONCURRENTLY IF EXISTS transactions_user_created_idx;
