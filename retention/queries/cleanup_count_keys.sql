-- Dry run of the dedupe store's cleanup: how many of its keys have expired
-- by @as_of.
SELECT count(*) AS idempotency_keys FROM engagement_idempotency_keys WHERE expires_at <= @as_of
