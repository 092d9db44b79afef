-- The throwaway cluster's settings that its test checks: no fsync, and
-- WAL minimal since it streams to no standby.
SELECT current_setting('fsync') AS fsync, current_setting('wal_level') AS wal_level
