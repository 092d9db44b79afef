-- Renews a run's lease; no row when the run is no longer 'running' (another
-- run found it silent and took over).
UPDATE engagement_job_runs SET heartbeat_at = clock_timestamp()
 WHERE id = @id AND status = 'running'
RETURNING id
