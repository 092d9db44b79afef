-- Renews a run's lease (or shows a run that holds none alive); no row when
-- the run is no longer in progress (another run found it silent and marked
-- it abandoned).
UPDATE engagement_job_runs SET heartbeat_at = clock_timestamp()
 WHERE id = @id AND status IN ('running', 'delivering')
RETURNING id
