-- Takes the lease of a job and shard by recording a 'running' run, unless
-- another run holds it (the unique index on running runs): then no row.
-- The conflict target and its predicate are the index's own, as every
-- release has named them: an earlier release's binary on this schema takes
-- the same lease. (queue-process's runs hold no lease: run_record.sql.)
-- nullable: @shard
INSERT INTO engagement_job_runs (job, as_of, hostname, pid, shard, holder, heartbeat_at)
VALUES (@job, @as_of, @hostname, @pid, @shard::text, @holder, clock_timestamp())
ON CONFLICT (job, (coalesce(shard, ''))) WHERE status = 'running' DO NOTHING
RETURNING id
