-- Settle the messages in flight ('processing') that no live processor will
-- finish: those whose claim is abandoned (engagement_claim_abandoned: the
-- holder is dead, or a claim without a holder row is past its deadline or
-- has none), and, when @own is set, every claim of @own (a processor
-- handing back what it still holds as it exits). First, holders not renewed
-- in time are buried: the UPDATE takes each one's row lock, so a renewal
-- racing it (hold.sql) either lands first, and the holder lives, or sees the
-- row buried and learns that its claims are gone.
--
-- The send ledger on @transport says what became of each message:
--   'sent'        → the send succeeded before its holder stopped: sent.
--   'processing'  → a send started and its outcome is unknown: on a
--                   transport that de-duplicates, pending (resent under the
--                   same idempotency key); otherwise failed with @unknown
--                   and in_doubt, never sent again.
--   none/'failed' → no send was in flight: pending, its retries unspent.
-- Returns how many were settled, and the ids of those pending again (their
-- send budget is given back).
WITH buried AS (
    UPDATE engagement_queue_holders
       SET buried = true
     WHERE NOT buried AND alive_until < clock_timestamp()
    RETURNING holder
), abandoned AS (
    SELECT q.id, l.status AS ledger_status, l.provider_message_id
      FROM engagement_message_queue q
      LEFT JOIN engagement_processed_messages l ON l.message_id = q.id AND l.transport = @transport
     WHERE q.status = 'processing'
       AND (q.claimed_by = @own::text
            OR q.claimed_by IN (SELECT holder FROM buried)
            OR engagement_claim_abandoned(q.claimed_by, q.claimed_until, now()))
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
           in_doubt = (a.ledger_status IS NOT DISTINCT FROM 'processing' AND NOT @deduplicates),
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
SELECT count(*)::int AS settled, coalesce(array_agg(id::text) FILTER (WHERE status = 'pending'), '{}') AS pending
  FROM settled;
