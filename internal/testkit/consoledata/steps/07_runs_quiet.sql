-- Where quiet hours put what a run at each of @at queues, for each zone of
-- @zones (pg_temp.cd_defer, as queue-process decides it): run by run, zone
-- by zone, in one array.
SELECT array_agg(pg_temp.cd_defer(t.at, z.name) ORDER BY t.n, z.k) AS sched
  FROM unnest(@at::timestamptz[]) WITH ORDINALITY AS t (at, n),
       unnest(@zones::text[]) WITH ORDINALITY AS z (name, k)
