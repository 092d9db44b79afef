-- Asks the standby to pause its replay.
SELECT pg_wal_replay_pause()
