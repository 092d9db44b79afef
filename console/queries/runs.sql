-- The latest @per_job runs of each job (its shards together), newest
-- first, with their counters: queue-process may run every minute, and the
-- daily and weekly jobs' runs must not drop off the page for it. The jobs
-- are found by a skip scan of the (job, started_at) index, one probe per
-- job, not by reading every run.
WITH RECURSIVE jobs (job) AS (
    (SELECT job FROM engagement_job_runs ORDER BY job LIMIT 1)
    UNION ALL
    SELECT (SELECT r.job FROM engagement_job_runs r WHERE r.job > j.job ORDER BY r.job LIMIT 1)
      FROM jobs j
     WHERE j.job IS NOT NULL
)
SELECT r.id, r.job, coalesce(r.shard, '') AS shard, r.as_of, r.started_at, r.finished_at, r.status,
       coalesce(r.counters, '{}'::jsonb) AS counters, coalesce(r.error, '') AS error
  FROM jobs j
 CROSS JOIN LATERAL (
       SELECT * FROM engagement_job_runs r
        WHERE r.job = j.job
        ORDER BY r.started_at DESC, r.id DESC
        LIMIT @per_job
 ) r
 WHERE j.job IS NOT NULL
 ORDER BY r.started_at DESC, r.id DESC;
