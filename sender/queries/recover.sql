-- Settle the messages whose claim is abandoned: in flight ('processing')
-- past their deadline, or with none at all (no process can renew such a
-- claim, e.g. after a migration went down and up). The send ledger on
-- @transport says what became of each:
--   'sent'        → the send succeeded before its holder died: sent.
--   'processing'  → a send started and its outcome is unknown: on a
--                   transport that de-duplicates, pending (resent under the
--                   same idempotency key); otherwise failed with @unknown,
--                   never sent again.
--   none/'failed' → no send was in flight: pending.
WITH abandoned AS (
    SELECT q.id, l.status AS ledger_status, l.provider_message_id
      FROM engagement_message_queue q
      LEFT JOIN engagement_processed_messages l ON l.message_id = q.id AND l.transport = @transport
     WHERE q.status = 'processing'
       AND (q.claimed_until IS NULL OR q.claimed_until < now())
       FOR UPDATE OF q SKIP LOCKED
), settled AS (
    UPDATE engagement_message_queue q
       SET status = CASE WHEN a.ledger_status = 'sent' THEN 'sent'
                         WHEN a.ledger_status = 'processing' AND NOT @deduplicates THEN 'failed'
                         ELSE 'pending' END,
           sent_at = CASE WHEN a.ledger_status = 'sent' THEN coalesce(q.sent_at, now()) END,
           provider_message_id = coalesce(a.provider_message_id, q.provider_message_id),
           error_message = CASE WHEN a.ledger_status = 'processing' AND NOT @deduplicates THEN @unknown
                                ELSE q.error_message END,
           claimed_until = NULL,
           claimed_by = NULL
      FROM abandoned a
     WHERE q.id = a.id
    RETURNING q.id, q.status
), ledger AS (
    UPDATE engagement_processed_messages l
       SET status = 'failed', error = @unknown
      FROM settled s
     WHERE l.message_id = s.id
       AND l.transport = @transport
       AND l.status = 'processing'
       AND s.status = 'failed'
)
SELECT count(*) FROM settled;
