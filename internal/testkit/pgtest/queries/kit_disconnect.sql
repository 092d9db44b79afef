-- Ends every other connection to database @datname, so that it can be
-- copied (CloneDatabase).
SELECT pg_terminate_backend(pid) AS terminated
  FROM pg_stat_activity
 WHERE datname = @datname AND pid <> pg_backend_pid()
