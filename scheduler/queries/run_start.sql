-- Takes the lease of a job and shard by recording a 'running' run, unless
-- another run holds it (the unique index on running runs): then no row.
-- Runs of queue-process hold no lease (they work alongside one another;
-- migration 44): theirs is always recorded. Without @as_of (queue-process
-- without --as-of) the run is as of the database clock.
INSERT INTO engagement_job_runs (job, as_of, hostname, pid, shard, holder, heartbeat_at)
VALUES (@job, coalesce(@as_of::timestamptz, statement_timestamp()), @hostname, @pid, @shard::text, @holder, clock_timestamp())
ON CONFLICT (job, (coalesce(shard, ''))) WHERE status = 'running' AND job <> 'queue-process' DO NOTHING
RETURNING id
