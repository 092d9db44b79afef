-- The job runs: one engagement-daily run a day from @first_day (the first
-- day the log needs, at the latest the window's first) to @r0, and one
-- engagement-weekly run each Monday 09:00 UTC from @w0 back @nw weeks, in
-- the order they started, so ids grow with time. A day cd_failed picks has
-- a failed run first (the server ended its connection before the first
-- batch committed: it moved nobody) and the run that did the day's work
-- half an hour later; about one run in 33 is partial (a few users failed,
-- step 10 lists them). Counters are filled in by step 10, from what the
-- runs did. hostname and holder are what a cron pod reports: the pod's
-- name, pid 1, its boot id and pid namespace.
INSERT INTO engagement_job_runs (job, as_of, started_at, finished_at, status, error, hostname, pid, heartbeat_at, holder)
SELECT job, as_of, started_at, finished_at, status, error,
       job || '-' || to_char(as_of, 'YYYYMMDDHH24MI') || '-' || substr(md5(job || as_of::text || status), 1, 5),
       1, finished_at,
       (substr(md5('boot' || job || as_of::text || status), 1, 8) || '-' || substr(md5('boot' || job || as_of::text || status), 9, 4)
        || '-' || substr(md5('boot' || job || as_of::text || status), 13, 4) || '-' || substr(md5('boot' || job || as_of::text || status), 17, 4)
        || '-' || substr(md5('boot' || job || as_of::text || status), 21, 12)) || '/pid:[4026532' || (100 + pg_temp.cd_day(as_of) % 900) || ']'
  FROM (
        SELECT 'engagement-daily' AS job, r.as_of, st.started_at,
               st.started_at + (62 + 30 * pg_temp.cd_u(pg_temp.cd_day(r.as_of), 53)) * interval '1 second' AS finished_at,
               CASE WHEN pg_temp.cd_u(pg_temp.cd_day(r.as_of), 52) < 0.03 THEN 'partial' ELSE 'succeeded' END AS status,
               NULL AS error
          FROM generate_series(@first_day::timestamptz, @r0::timestamptz, interval '1 day') AS r (as_of)
         CROSS JOIN LATERAL (SELECT pg_temp.cd_started(r.as_of) AS started_at) st
        UNION ALL
        SELECT 'engagement-daily', r.as_of, r.as_of + (3 + 15 * pg_temp.cd_u(pg_temp.cd_day(r.as_of), 50)) * interval '1 second',
               r.as_of + (9 + 25 * pg_temp.cd_u(pg_temp.cd_day(r.as_of), 54)) * interval '1 second',
               'failed',
               'step inactivity_14d: FATAL: terminating connection due to administrator command (SQLSTATE 57P01)'
          FROM generate_series(@first_day::timestamptz, @r0::timestamptz, interval '1 day') AS r (as_of)
         WHERE pg_temp.cd_failed(r.as_of)
        UNION ALL
        SELECT 'engagement-weekly', w.as_of, pg_temp.cd_wstarted(w.as_of),
               pg_temp.cd_wstarted(w.as_of) + (55 + 20 * pg_temp.cd_u(pg_temp.cd_day(w.as_of), 61)) * interval '1 second',
               'succeeded', NULL
          FROM generate_series(0, @nw::int - 1) AS j
         CROSS JOIN LATERAL (SELECT @w0::timestamptz - j * interval '7 days' AS as_of) w
       ) r
 ORDER BY started_at
