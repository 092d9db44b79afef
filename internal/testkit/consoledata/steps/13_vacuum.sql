-- VACUUM rather than ANALYZE alone: it also sets the visibility map and
-- the rows' hint bits, as in a database that has been running, so the
-- console's first page loads do not pay for writing them.
VACUUM (ANALYZE) user_profiles, user_engagement_states, transactions,
    engagement_message_queue, engagement_state_transitions, engagement_job_runs,
    engagement_queue_holders, engagement_processed_messages, engagement_transport_pacing
