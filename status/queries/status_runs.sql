-- The latest @runs_per_job runs of every job and shard, by job and shard,
-- newest first.
SELECT r.id, r.job, coalesce(r.shard, '') AS shard, r.as_of, r.started_at, r.finished_at, r.status,
       r.counters, coalesce(r.error, '') AS error
  FROM (SELECT DISTINCT job, shard FROM engagement_job_runs) j
 CROSS JOIN LATERAL (
       SELECT * FROM engagement_job_runs r
        WHERE r.job = j.job AND r.shard IS NOT DISTINCT FROM j.shard
        ORDER BY r.started_at DESC, r.id DESC
        LIMIT @runs_per_job
 ) r
 ORDER BY r.job, r.shard NULLS FIRST, r.started_at DESC, r.id DESC
