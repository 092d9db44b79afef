-- A run's transitions, found by its id (analytics reads them back after the
-- run; an operator asks "what did run N do?"). The log only grows, so
-- without this every such look-up would scan all of it. CONCURRENTLY, so a
-- live database keeps taking writes; hence a migration of its own.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_state_transitions_job_run_idx
    ON engagement_state_transitions (job_run_id) WHERE job_run_id IS NOT NULL;
