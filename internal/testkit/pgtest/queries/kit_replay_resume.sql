-- Resumes the standby's replay.
SELECT pg_wal_replay_resume()
