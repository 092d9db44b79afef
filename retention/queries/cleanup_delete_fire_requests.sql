-- Deletes up to @n of the bot's request keys (engagement_fire's
-- engagement_fire_requests) recorded before @cutoff, the messages'
-- retention: a webhook is not retried for that long, so the key has done
-- its work. Returns how many. No row lock is taken first (that would need
-- UPDATE, which the jobs' role has not): a key that old is only ever read.
WITH doomed AS (
    SELECT r.request_key FROM engagement_fire_requests r
     WHERE r.created_at < @cutoff
     LIMIT @n
)
DELETE FROM engagement_fire_requests r USING doomed WHERE r.request_key = doomed.request_key
