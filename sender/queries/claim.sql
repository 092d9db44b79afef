-- Claim up to @batch due pending messages, oldest first, for @holder until
-- now() + @claim_timeout. FOR UPDATE SKIP LOCKED lets any number of
-- processes claim side by side, each message going to exactly one of them.
--
-- Nullable columns come back coalesced and the params as raw JSON text, so
-- no row can make the claim itself fail: a row that cannot be delivered
-- fails alone, when its turn comes.
WITH claimed AS (
    UPDATE engagement_message_queue q
       SET status = 'processing',
           claimed_by = @holder,
           claimed_until = now() + @claim_timeout::interval
     WHERE q.id IN (
           SELECT id
             FROM engagement_message_queue
            WHERE status = 'pending' AND scheduled_for <= now()
            ORDER BY scheduled_for
            LIMIT @batch
              FOR UPDATE SKIP LOCKED)
    RETURNING q.*
)
SELECT c.id::text,
       coalesce(c.user_id::text, '')       AS user_id,
       coalesce(c.message_type, '')        AS message_type,
       coalesce(c.message_key, '')         AS message_key,
       c.message_params::text              AS message_params,
       coalesce(nullif(btrim(p.locale), ''), @default_locale) AS locale,
       coalesce(c.destination, '')         AS destination,
       coalesce(c.destination_jid, '')     AS destination_jid,
       coalesce(c.idempotency_key, c.id::text) AS idempotency_key,
       c.retry_count
  FROM claimed c
  LEFT JOIN user_profiles p ON p.user_id = c.user_id
 ORDER BY c.scheduled_for, c.id;
