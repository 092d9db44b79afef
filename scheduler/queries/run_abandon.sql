-- Marks a run in progress abandoned, unless its heartbeat moved since it
-- was looked at (@beat): a holder that is alive after all keeps its lease.
UPDATE engagement_job_runs
   SET status = 'abandoned', finished_at = clock_timestamp(), error = @reason::text
 WHERE id = @id AND status IN ('running', 'delivering') AND coalesce(heartbeat_at, started_at) = @beat::timestamptz
