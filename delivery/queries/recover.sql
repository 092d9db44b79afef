-- Settle the messages in flight ('processing') that no live processor will
-- finish: those whose claim is abandoned, and, when @own is set, every
-- claim of @own (a processor handing back what it still holds as it exits).
--
-- A claim is abandoned when its holder is buried: holders not renewed in
-- time are buried here, each one's row locked in holder order and skipped
-- when another transaction holds it. The row's lock decides the race with
-- that holder's renewal (hold.sql): the renewal lands first, and the holder
-- lives, or it finds the row buried and learns that its claims are gone.
-- A row locked elsewhere is a renewal in flight (the holder lives) or
-- another recovery burying it (that one settles its claims): either way not
-- this statement's to settle, so a recovery never waits on a holder's row,
-- and recoveries side by side neither queue the renewals behind them nor
-- deadlock one another (under a 1 s --claim-timeout on a loaded machine,
-- they did both: leases lost, "deadlock detected"). A holder buried earlier whose claims are
-- still in flight (one was locked then) is settled now; a claim without a
-- holder row, taken by an older release, is abandoned past its own
-- claimed_until (engagement_claim_abandoned's rule, read here as joins, not
-- a function call per message).
--
-- The send ledger on @transport says what became of each message:
--   'sent'        → the send succeeded before its holder stopped: sent.
--   'processing'  → a send started and its outcome is unknown: failed with
--                   @unknown and in_doubt, never sent again.
--   none/'failed' → no send was in flight: pending, its retries unspent.
-- On a transport that de-duplicates (@deduplicates: the webhook, the log)
-- no start is written (batched recording), so none of that is known: its
-- request may have reached the receiver, whatever the ledger says but
-- 'sent'. Such a message goes back pending and in_doubt: resent only under
-- its same idempotency key, never cancelled without asking the receiver
-- first (claim.sql), and its send budget slot is kept.
-- Returns how many were settled, and the ids of those pending again and
-- not in doubt (their send budget is given back: nothing was sent).
WITH expired AS (
    SELECT holder
      FROM engagement_queue_holders
     WHERE NOT buried AND alive_until < clock_timestamp()
     ORDER BY holder
       FOR UPDATE SKIP LOCKED
), buried AS (
    UPDATE engagement_queue_holders h
       SET buried = true
      FROM expired e
     WHERE h.holder = e.holder
    RETURNING h.holder
), abandoned AS (
    SELECT q.id, l.status AS ledger_status, l.provider_message_id
      FROM engagement_message_queue q
      LEFT JOIN engagement_processed_messages l ON l.message_id = q.id AND l.transport = @transport
     WHERE q.status = 'processing'
       AND (q.claimed_by = @own::text
            OR q.claimed_by IN (SELECT holder FROM buried)
            OR q.claimed_by IN (SELECT holder FROM engagement_queue_holders WHERE buried)
            OR ((q.claimed_until IS NULL OR q.claimed_until < now())
                AND NOT EXISTS (SELECT FROM engagement_queue_holders h WHERE h.holder = q.claimed_by)))
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
           in_doubt = CASE WHEN a.ledger_status IS NOT DISTINCT FROM 'sent' THEN false
                           WHEN @deduplicates THEN true
                           ELSE a.ledger_status IS NOT DISTINCT FROM 'processing' END,
           claimed_until = NULL,
           claimed_by = NULL
      FROM abandoned a
     WHERE q.id = a.id
    RETURNING q.id, q.status, q.in_doubt
), ledger AS (
    UPDATE engagement_processed_messages l
       SET status = 'failed', error = @unknown
      FROM settled s
     WHERE l.message_id = s.id
       AND l.transport = @transport
       AND l.status = 'processing'
       AND s.status = 'failed'
)
SELECT count(*)::int AS settled, coalesce(array_agg(id::text) FILTER (WHERE status = 'pending' AND NOT in_doubt), '{}') AS pending
  FROM settled;
