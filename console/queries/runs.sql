-- The latest @limit job runs, newest first, with their counters.
SELECT id, job, coalesce(shard, '') AS shard, as_of, started_at, finished_at, status,
       coalesce(counters, '{}'::jsonb) AS counters, coalesce(error, '') AS error
  FROM engagement_job_runs
 ORDER BY started_at DESC, id DESC
 LIMIT @limit;
