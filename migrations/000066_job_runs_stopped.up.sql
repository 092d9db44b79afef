-- A job's run told to stop (SIGINT, SIGTERM: a platform's ordinary stop, a
-- deploy) is 'stopped', not 'failed': it finished the batches in hand,
-- recorded what it did in its counters (with "stopped": "shutdown"), and
-- the next run does the rest. Recorded 'failed', it fired
-- EngagementJobRunFailed for every such stop (issue 55). Like 'succeeded'
-- and 'partial' it ends the run's lease: the unique index on running runs
-- does not cover it.
--
-- The binaries of earlier releases keep working on this schema: they never
-- write 'stopped', and read a run's status as text.
ALTER TABLE engagement_job_runs DROP CONSTRAINT engagement_job_runs_status_check;
ALTER TABLE engagement_job_runs ADD CONSTRAINT engagement_job_runs_status_check
    CHECK (status IN ('running', 'delivering', 'succeeded', 'partial', 'failed', 'stopped', 'abandoned'));
