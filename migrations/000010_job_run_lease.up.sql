-- Runs of a job take turns through a lease on their engagement_job_runs
-- row instead of a session advisory lock, which a transaction pooler
-- (PgBouncer, Supavisor) cannot hold: the row of the run in progress is
-- the only 'running' row of its job and shard (the unique index below), and
-- its process renews heartbeat_at while it lives. A run whose heartbeat
-- stopped for longer than the lease timeout (30 s by default) is marked
-- 'abandoned' by the next run, which then takes over.
--
-- holder names the machine and process namespace of the run's process
-- (boot id and pid namespace), so that a run started on the same machine
-- can see at once that the holder's pid is gone (killed) instead of
-- waiting for its heartbeat to age.
ALTER TABLE engagement_job_runs ADD COLUMN heartbeat_at timestamptz;
ALTER TABLE engagement_job_runs ADD COLUMN holder text;

-- Runs left 'running' by killed processes of earlier versions (which the
-- advisory lock told apart) would break the unique index: only the newest
-- of each job and shard can still be alive, and without a heartbeat the
-- next run takes it over at once anyway.
UPDATE engagement_job_runs r
   SET status = 'abandoned', finished_at = now(),
       error = 'the run ended without recording an outcome (killed?)'
 WHERE status = 'running'
   AND EXISTS (SELECT 1 FROM engagement_job_runs n
                WHERE n.job = r.job AND n.shard IS NOT DISTINCT FROM r.shard
                  AND n.status = 'running' AND n.id > r.id);

-- The table holds one row per run: small enough to index in place.
CREATE UNIQUE INDEX engagement_job_runs_running_idx
    ON engagement_job_runs (job, (coalesce(shard, ''))) WHERE status = 'running';
