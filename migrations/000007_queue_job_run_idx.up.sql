-- The messages a run queued, found by its id (see 000006). CONCURRENTLY, so
-- a live queue keeps taking writes; hence a migration of its own.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_message_queue_job_run_idx
    ON engagement_message_queue (job_run_id) WHERE job_run_id IS NOT NULL;
