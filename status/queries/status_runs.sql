-- The latest @runs_per_job runs of every job and shard, by job and shard,
-- newest first. The jobs and shards are found by a loose scan of the
-- (job, shard, started_at) index, one probe each, and each one's latest
-- runs by a probe of their own: queue-process may record a run every
-- minute, and its history is never read whole.
-- not null: shard
WITH RECURSIVE shards (job, shard) AS (
    (SELECT r.job, coalesce(r.shard, '') FROM engagement_job_runs r ORDER BY r.job, coalesce(r.shard, '') LIMIT 1)
    UNION ALL
    SELECT n.job, n.shard
      FROM shards s
     CROSS JOIN LATERAL (
           SELECT r.job, coalesce(r.shard, '') AS shard FROM engagement_job_runs r
            WHERE (r.job, coalesce(r.shard, '')) > (s.job, s.shard)
            ORDER BY r.job, coalesce(r.shard, '')
            LIMIT 1
     ) n
)
SELECT r.id, r.job, s.shard, r.as_of, r.started_at, r.finished_at, r.status, r.counters,
       coalesce(r.error, '') AS error
  FROM shards s
 CROSS JOIN LATERAL (
       SELECT * FROM engagement_job_runs r
        WHERE r.job = s.job AND coalesce(r.shard, '') = s.shard
        ORDER BY r.started_at DESC, r.id DESC
        LIMIT @runs_per_job
 ) r
 ORDER BY s.job, s.shard, r.started_at DESC, r.id DESC
