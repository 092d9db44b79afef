-- Back to the statuses before queue-process recorded its runs: a
-- queue-process run still in progress ('delivering') is marked abandoned
-- (its process, if alive, records its outcome over it when it ends).
UPDATE engagement_job_runs
   SET status = 'abandoned', finished_at = coalesce(finished_at, now()),
       error = 'marked abandoned by migrate down 44: the schema no longer knows runs in progress alongside one another'
 WHERE status = 'delivering';
DROP INDEX engagement_job_runs_in_progress_idx;
ALTER TABLE engagement_job_runs DROP CONSTRAINT engagement_job_runs_status_check;
ALTER TABLE engagement_job_runs ADD CONSTRAINT engagement_job_runs_status_check
    CHECK (status IN ('running', 'succeeded', 'partial', 'failed', 'abandoned'));
