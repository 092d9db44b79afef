-- The primary's current WAL position.
SELECT pg_current_wal_insert_lsn()::text AS lsn
