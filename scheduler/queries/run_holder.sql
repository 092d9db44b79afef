-- The runs in progress of a job and shard (one 'running' at most; any
-- number 'delivering' for a job whose runs work alongside one another,
-- queue-process): each one's process (holder, hostname, pid) and how long
-- its heartbeat has been silent by the database clock. A row without a
-- heartbeat was written before runs had leases. The status test is
-- engagement_job_runs_in_progress_idx's predicate, so only the runs in
-- progress are read.
-- nullable: @shard
SELECT id, coalesce(holder, '') AS holder, coalesce(pid, 0) AS pid, heartbeat_at IS NULL AS no_heartbeat,
       extract(epoch FROM clock_timestamp() - coalesce(heartbeat_at, started_at))::float8 AS silent_seconds,
       coalesce(heartbeat_at, started_at) AS beat
  FROM engagement_job_runs
 WHERE job = @job AND shard IS NOT DISTINCT FROM @shard::text AND status IN ('running', 'delivering')
 ORDER BY id
