-- How far behind the replica the snapshot pages read from is, read on the
-- replica in the snapshot's own transaction: whether it is a standby at
-- all (--replica-url may name a primary), whether it has replayed all the
-- WAL it received (then it is as current as streaming allows), how long
-- ago the last transaction it replayed committed on the primary, and
-- whether replay is paused (pg_wal_replay_pause). Every function is
-- executable by any role. The lag is NULL until the standby has replayed a
-- transaction.
SELECT pg_is_in_recovery() AS standby,
       coalesce(pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn(), false) AS caught_up,
       extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS lag_seconds,
       CASE WHEN pg_is_in_recovery() THEN pg_is_wal_replay_paused() ELSE false END AS paused;
