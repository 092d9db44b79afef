-- The goodbye's holdout (migration 55): the held-out goodbyes, few among
-- the log's rows, for verify's no_goodbye_to_holdout and the funnel's
-- arms, without a scan of the whole log.
--
-- Built CONCURRENTLY, in a file of its own (CONCURRENTLY cannot run in a
-- transaction): on the bot's database the bot keeps writing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_state_transitions_holdout_idx
    ON engagement_state_transitions (created_at) INCLUDE (user_id, job_run_id) WHERE holdout;
