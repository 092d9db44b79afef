-- The result stored for @key, if the key is live at @now (the caller's
-- clock), and whether it has none (NULL: checked, no result stored yet).
SELECT result, result IS NULL AS no_result FROM engagement_idempotency_keys WHERE key = @key AND expires_at > @now
