-- The messages of kind @message_type run @run_id queued, in order, with the
-- transaction count a weekly review carries: one event each.
SELECT id::text AS id, user_id::text AS user_id, message_params->>'count' AS transaction_count, created_at
  FROM engagement_message_queue
 WHERE job_run_id = @run_id AND message_type = @message_type
 ORDER BY created_at, id
