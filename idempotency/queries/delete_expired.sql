-- Deletes up to @batch keys (of every prefix) that expired at or before
-- @before, oldest first; rows a concurrent Check is reviving are skipped.
DELETE FROM engagement_idempotency_keys
 WHERE key IN (SELECT key FROM engagement_idempotency_keys
                WHERE expires_at <= @before
                ORDER BY expires_at
                LIMIT @batch
                  FOR UPDATE SKIP LOCKED)
