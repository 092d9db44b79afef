-- The demo's "now": the latest instant its jobs ran as of (day 3,
-- simulated); NULL before any run.
--
SELECT max(as_of) AS last_day FROM engagement_job_runs;
