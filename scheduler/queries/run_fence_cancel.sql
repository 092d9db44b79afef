-- Cancels the statements still running for a job and shard's earlier runs:
-- every batch holds the shared transaction-level advisory lock @fence_key
-- (a bigint key: classid holds its high 32 bits, objid its low ones).
SELECT count(*) FILTER (WHERE pg_cancel_backend(l.pid))::int AS cancelled
  FROM pg_locks l
 WHERE l.locktype = 'advisory' AND l.objsubid = 1
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND ((l.classid::bigint << 32) | l.objid::bigint) = @fence_key
   AND l.pid <> pg_backend_pid()
