-- The latest run of each job in @jobs, in their order, for the overview's
-- health summary: of each shard of a sharded job, the latest run that
-- started within @shard_span of the job's latest, so that one failed shard
-- is not hidden behind another that ran after it. A job that never ran is
-- one row of NULLs beside its name.
--
-- nullable: as_of, started_at, finished_at
SELECT j.job, coalesce(r.shard, '') AS shard, r.as_of, r.started_at, r.finished_at,
       coalesce(r.status, '') AS status, coalesce(r.error, '') AS error
  FROM unnest(@jobs::text[]) WITH ORDINALITY AS j(job, n)
  LEFT JOIN LATERAL (
       SELECT DISTINCT ON (coalesce(r.shard, '')) r.shard, r.as_of, r.started_at, r.finished_at, r.status, r.error
         FROM engagement_job_runs r
        WHERE r.job = j.job
          AND r.started_at >= (SELECT l.started_at FROM engagement_job_runs l WHERE l.job = j.job
                                ORDER BY l.started_at DESC LIMIT 1) - @shard_span::interval
        ORDER BY coalesce(r.shard, ''), r.started_at DESC, r.id DESC
  ) r ON true
 ORDER BY j.n, r.shard;
