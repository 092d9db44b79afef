-- The transactions (virtual ids and pids) holding a lock on the table
-- @table that CREATE INDEX CONCURRENTLY must wait for: one that lets them
-- write (ShareUpdateExclusiveLock, autovacuum's, is left out: a build
-- cancels autovacuum rather than waiting for it).
--
-- not null: virtualtransaction, pid
SELECT l.virtualtransaction, l.pid
  FROM pg_locks l
 WHERE l.locktype = 'relation'
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND l.relation = to_regclass(@table::text)
   AND l.granted
   AND l.mode IN ('RowExclusiveLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
   AND l.pid <> pg_backend_pid()
