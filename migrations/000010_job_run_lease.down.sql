DROP INDEX IF EXISTS engagement_job_runs_running_idx;
ALTER TABLE engagement_job_runs DROP COLUMN IF EXISTS holder;
ALTER TABLE engagement_job_runs DROP COLUMN IF EXISTS heartbeat_at;
