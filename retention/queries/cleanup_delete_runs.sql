-- Deletes up to @n job runs (engagement_job_runs) started before @cutoff
-- (cleanup --runs-older-than), and returns how many. Never deleted,
-- however old:
--   a run still going ('running', or the daily job's 'delivering');
--   one the queue or the state transition log still names (job_run_id:
--     verify's no_goodbye_to_holdout reads the held-out goodbye's run's
--     as-of; engagement-daily reports a duplicate's first run): it goes
--     once cleanup has deleted what names it;
--   one of the latest @keep runs of its job and shard: what the console's
--     runs page lists (console.RunsPerJob) and what status, the health
--     summary and verify read as a job's last run.
-- The latest runs come from the (job, shard, started_at) index, one probe
-- a run.
WITH doomed AS (
    SELECT r.id FROM engagement_job_runs r
     WHERE r.started_at < @cutoff
       AND r.status NOT IN ('running', 'delivering')
       AND NOT EXISTS (SELECT FROM engagement_message_queue q WHERE q.job_run_id = r.id)
       AND NOT EXISTS (SELECT FROM engagement_state_transitions t WHERE t.job_run_id = r.id)
       AND (r.started_at, r.id) < (SELECT n.started_at, n.id FROM engagement_job_runs n
                                    WHERE n.job = r.job AND coalesce(n.shard, '') = coalesce(r.shard, '')
                                    ORDER BY n.started_at DESC, n.id DESC
                                   OFFSET @keep::int - 1 LIMIT 1)
     LIMIT @n
       FOR UPDATE SKIP LOCKED
)
DELETE FROM engagement_job_runs r USING doomed WHERE r.id = doomed.id
