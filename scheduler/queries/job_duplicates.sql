-- When and by which run the messages under the keys $1 were first queued:
-- the debug line of each duplicate a batch skipped.
SELECT idempotency_key, created_at, job_run_id, message_type
  FROM engagement_message_queue
 WHERE idempotency_key = ANY($1::text[])
 ORDER BY idempotency_key
