DROP TABLE IF EXISTS engagement_state_transitions;
DROP TABLE IF EXISTS engagement_job_runs;
DROP TABLE IF EXISTS engagement_message_queue;
DROP TABLE IF EXISTS transactions;
DROP TABLE IF EXISTS user_engagement_states;
DROP TABLE IF EXISTS user_profiles;
