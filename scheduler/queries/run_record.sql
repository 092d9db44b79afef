-- Records a run that holds no lease (queue-process's: its runs work
-- alongside one another) as 'delivering', a status the unique index on
-- running runs does not cover (migration 44): it is always recorded.
-- Without @as_of (queue-process without --as-of) the run is as of the
-- database clock.
-- nullable: @as_of, @shard
INSERT INTO engagement_job_runs (job, as_of, hostname, pid, shard, holder, heartbeat_at, status)
VALUES (@job, coalesce(@as_of::timestamptz, statement_timestamp()), @hostname, @pid, @shard::text, @holder, clock_timestamp(), 'delivering')
RETURNING id
