-- Scale-out and traceability.
--
-- shard: a run started with --shard i/N handles only the users whose id
-- hashes to shard i; its engagement_job_runs row says which ('1/3'), so
-- runs of different shards of one job never mark each other abandoned and
-- the status command can show them apart. NULL for an unsharded run.
--
-- job_run_id: the engagement_job_runs row of the run that queued a message
-- (NULL for messages queued with engagementctl enqueue or by the bot), so a
-- run's own messages can be found exactly, e.g. to report them to analytics
-- once its batches have committed.
ALTER TABLE engagement_job_runs ADD COLUMN shard text;
ALTER TABLE engagement_message_queue ADD COLUMN job_run_id bigint;
