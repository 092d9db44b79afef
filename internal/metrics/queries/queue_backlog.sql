-- The delivery queue's backlog, as queue-process leaves it: pending
-- messages, those due by the database clock, and how long the oldest due
-- one has waited (0 when none is due).
SELECT count(*) AS pending,
       count(*) FILTER (WHERE scheduled_for <= now()) AS due,
       coalesce(extract(epoch FROM now() - min(scheduled_for) FILTER (WHERE scheduled_for <= now())), 0)::float8 AS oldest_due_age_seconds
  FROM engagement_message_queue
 WHERE status = 'pending'
