-- When and by which run the messages under @keys were first queued: the
-- debug line of each duplicate a batch skipped.
-- not null: idempotency_key
SELECT idempotency_key, created_at AS first_queued_at, job_run_id AS first_run_id, message_type
  FROM engagement_message_queue
 WHERE idempotency_key = ANY(@keys::text[])
 ORDER BY idempotency_key
