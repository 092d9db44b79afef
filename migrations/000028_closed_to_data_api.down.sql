-- Row level security stays on and the privileges stay revoked: reopening
-- the scheduler's tables to the Data API is never what a rollback wants.
SELECT 1;
