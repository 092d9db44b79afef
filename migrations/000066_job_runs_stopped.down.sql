-- Back to the statuses before a stopped run had its own: a stopped run is
-- recorded as the binaries before it recorded one, 'failed', its error
-- saying so.
UPDATE engagement_job_runs
   SET status = 'failed',
       error = 'stopped (SIGINT or SIGTERM); marked failed by migrate down 66: the schema no longer knows stopped runs'
 WHERE status = 'stopped';
ALTER TABLE engagement_job_runs DROP CONSTRAINT engagement_job_runs_status_check;
ALTER TABLE engagement_job_runs ADD CONSTRAINT engagement_job_runs_status_check
    CHECK (status IN ('running', 'delivering', 'succeeded', 'partial', 'failed', 'abandoned'));
