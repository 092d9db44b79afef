-- Deletes @key and its result, live or not.
DELETE FROM engagement_idempotency_keys WHERE key = @key
