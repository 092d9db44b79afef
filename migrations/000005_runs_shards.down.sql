ALTER TABLE engagement_message_queue DROP COLUMN IF EXISTS job_run_id;
ALTER TABLE engagement_job_runs DROP COLUMN IF EXISTS shard;
