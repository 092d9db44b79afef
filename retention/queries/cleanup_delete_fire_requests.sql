-- Deletes up to @n of the bot's request keys (engagement_fire's
-- engagement_fire_requests) recorded before @cutoff, the messages'
-- retention: a webhook is not retried for that long, so the key has done
-- its work. Returns how many. Rows a running call holds are left for the
-- next batch.
WITH doomed AS (
    SELECT r.request_key FROM engagement_fire_requests r
     WHERE r.created_at < @cutoff
     LIMIT @n
       FOR UPDATE SKIP LOCKED
)
DELETE FROM engagement_fire_requests r USING doomed WHERE r.request_key = doomed.request_key
