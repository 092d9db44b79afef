-- The job and as-of of run @run_id, which every event carries.
SELECT job, as_of FROM engagement_job_runs WHERE id = @run_id
