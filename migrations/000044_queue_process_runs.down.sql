-- Back to one running run per job and shard, queue-process included: the
-- queue-process runs still running, but the newest, are marked abandoned
-- (the index would refuse them; their processes record their outcome over
-- it when they end).
UPDATE engagement_job_runs r
   SET status = 'abandoned', finished_at = now(),
       error = 'marked abandoned by migrate down 44: runs of queue-process no longer run side by side'
 WHERE r.job = 'queue-process' AND r.status = 'running'
   AND EXISTS (SELECT 1 FROM engagement_job_runs n
                WHERE n.job = r.job AND n.shard IS NOT DISTINCT FROM r.shard
                  AND n.status = 'running' AND n.id > r.id);
DROP INDEX engagement_job_runs_running_idx;
CREATE UNIQUE INDEX engagement_job_runs_running_idx
    ON engagement_job_runs (job, (coalesce(shard, ''))) WHERE status = 'running';
