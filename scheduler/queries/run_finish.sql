-- Records a run's outcome and ends its lease.
-- nullable: @counters, @error
UPDATE engagement_job_runs
   SET finished_at = clock_timestamp(), status = @status, counters = @counters::text::jsonb, error = @error::text
 WHERE id = @id
