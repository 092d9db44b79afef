-- The demo's "now": the latest instant it simulated, the last run's
-- as-of or the last send (queue-process stamps a simulated send a moment
-- past its run's as-of); NULL before any run.
SELECT greatest((SELECT max(as_of) FROM engagement_job_runs),
                (SELECT max(sent_at) FROM engagement_message_queue WHERE status = 'sent')) AS last_day;
