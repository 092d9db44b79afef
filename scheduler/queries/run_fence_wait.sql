-- Waits until no statement of an earlier run of the job and shard holds
-- the fence (see run_fence_cancel.sql); released at once with the
-- transaction.
SELECT pg_advisory_xact_lock(@fence_key)
