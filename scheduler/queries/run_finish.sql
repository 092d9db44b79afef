-- Records a run's outcome and ends its lease.
UPDATE engagement_job_runs
   SET finished_at = clock_timestamp(), status = @status, counters = @counters::jsonb, error = @error::text
 WHERE id = @id
