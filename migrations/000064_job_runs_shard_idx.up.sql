-- The runs of one job and shard, newest first: engagementctl status and
-- the console read the latest runs of every job and shard (status's
-- runs.sql) by a loose scan of it, one probe per job and shard, and each
-- one's latest runs by a probe of their own, never reading the whole
-- history (queue-process may record a run every minute).
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_job_runs_job_shard_idx
    ON engagement_job_runs (job, (coalesce(shard, '')), started_at DESC, id DESC);
