-- What a careless grant leaves on a plain PostgreSQL: the runs readable
-- by PUBLIC, their row level security off, a function of the scheduler's
-- callable by PUBLIC (TestVerifyDataAPIClosedWithoutTheRoles).
GRANT SELECT ON engagement_job_runs TO PUBLIC;
ALTER TABLE engagement_job_runs DISABLE ROW LEVEL SECURITY;
GRANT EXECUTE ON FUNCTION engagement_zone(text) TO PUBLIC;
