-- Whether the standby has received (@received), else replayed, the WAL
-- up to @lsn.
SELECT coalesce(CASE WHEN @received::boolean THEN pg_last_wal_receive_lsn() ELSE pg_last_wal_replay_lsn() END
                >= @lsn::text::pg_lsn, false) AS reached
