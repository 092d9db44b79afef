-- The runs that did each day's and week's work, oldest first.
SELECT id, job, as_of FROM engagement_job_runs WHERE status <> 'failed' ORDER BY as_of
