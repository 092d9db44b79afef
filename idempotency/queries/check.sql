-- Records @key (expiring at @expires_at), or takes over an expired row of
-- the same key (clearing its result); a live row is left alone and no row
-- is returned. The conflict is resolved under the row's lock, so concurrent
-- Checks of one key see exactly one winner. @now is the caller's clock.
INSERT INTO engagement_idempotency_keys AS k (key, created_at, expires_at)
VALUES (@key, @now, @expires_at)
ON CONFLICT (key) DO UPDATE
   SET created_at = EXCLUDED.created_at,
       expires_at = EXCLUDED.expires_at,
       result     = NULL
 WHERE k.expires_at <= @now
RETURNING true AS is_new
