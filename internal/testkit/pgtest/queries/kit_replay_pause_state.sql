-- Where the standby's replay pause stands: not paused, pause requested,
-- paused.
SELECT pg_get_wal_replay_pause_state() AS state
