-- queue-process records its runs in engagement_job_runs (job
-- 'queue-process'), so the console's Runs page and the status command can
-- say whether delivery runs. Its runs work alongside one another (any
-- number of processes deliver at once, each claiming its own messages), so
-- they hold no lease: the unique index on running runs, which makes the
-- runs of a job and shard take turns, leaves them out. A queue-process run
-- killed before it recorded its outcome is marked abandoned by the next
-- queue-process run, as a job's run is by the job's next run (its
-- heartbeat stopped, or its pid is gone).
--
-- The jobs' statement that takes the lease (scheduler/queries/run_start.sql)
-- names the same predicate, so it still finds this index. A job binary
-- older than this migration names only status = 'running', which no longer
-- finds it: deploy the binaries with the migration (docs/jobs.md).
DROP INDEX engagement_job_runs_running_idx;
CREATE UNIQUE INDEX engagement_job_runs_running_idx
    ON engagement_job_runs (job, (coalesce(shard, '')))
 WHERE status = 'running' AND job <> 'queue-process';
