-- Sets the @result of a live @key, keeping its expiry, or records an
-- unknown or expired key with the result and a fresh expiry (@expires_at).
-- @now is the caller's clock.
INSERT INTO engagement_idempotency_keys AS k (key, result, created_at, expires_at)
VALUES (@key, @result, @now, @expires_at)
ON CONFLICT (key) DO UPDATE
   SET result     = EXCLUDED.result,
       created_at = CASE WHEN k.expires_at <= @now THEN EXCLUDED.created_at ELSE k.created_at END,
       expires_at = CASE WHEN k.expires_at <= @now THEN EXCLUDED.expires_at ELSE k.expires_at END
