-- queue-process records its runs in engagement_job_runs (job
-- 'queue-process'), so the console's Runs page and the status command can
-- say whether delivery runs. Its runs work alongside one another (any
-- number of processes deliver at once, each claiming its own messages), so
-- they hold no lease: a queue-process run in progress is 'delivering', a
-- status of its own that the unique index on running runs (migration 10)
-- does not cover, so any number of them are in progress at once while the
-- jobs' runs still take turns. A queue-process run killed before it
-- recorded its outcome is marked abandoned by the next queue-process run,
-- as a job's run is by the job's next run (its heartbeat stopped, or its
-- pid is gone).
--
-- The unique index is left exactly as it was: the jobs' statement that
-- takes the lease (scheduler/queries/run_start.sql) names its predicate,
-- status = 'running', and so do the binaries of earlier releases, which
-- keep working on this schema. Only this project's binaries write
-- engagement_job_runs, and none before this migration writes 'delivering'.
ALTER TABLE engagement_job_runs DROP CONSTRAINT engagement_job_runs_status_check;
ALTER TABLE engagement_job_runs ADD CONSTRAINT engagement_job_runs_status_check
    CHECK (status IN ('running', 'delivering', 'succeeded', 'partial', 'failed', 'abandoned'));
-- The runs in progress of a job, which the next run looks up: without it,
-- every queue-process run (every minute, say) would read all its earlier
-- runs to find the few still in progress.
CREATE INDEX engagement_job_runs_in_progress_idx
    ON engagement_job_runs (job) WHERE status IN ('running', 'delivering');
