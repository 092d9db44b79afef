-- The demo's "now": the latest instant its jobs ran as of (day 3,
-- simulated); NULL before any run.
SELECT max(as_of) FROM engagement_job_runs;
