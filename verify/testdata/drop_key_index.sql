-- The queue without its unique index on idempotency keys: nothing stops a
-- second goodbye under the same key (TestVerifyReportsEachBrokenInvariant).
DROP INDEX engagement_message_queue_idempotency_key_idx;
