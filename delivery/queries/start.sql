-- Start an attempt at sending message @id, only while @holder still holds
-- its claim and is alive (the fencing check, in the same statement as the
-- start): the send ledger records the attempt as started ('processing',
-- one more attempt) before the external call. No row comes back when the
-- claim was lost: the message must not be sent.
WITH held AS (
    UPDATE engagement_message_queue
       SET claimed_until = now() + @claim_timeout::interval
     WHERE id = @id
       AND status = 'processing'
       AND claimed_by = @holder
       AND NOT engagement_claim_abandoned(claimed_by, claimed_until, now())
    RETURNING id
)
INSERT INTO engagement_processed_messages AS l (message_id, transport, status, attempts)
SELECT id, @transport, 'processing', 1
  FROM held
    ON CONFLICT (message_id, transport) DO UPDATE
   SET status = 'processing',
       attempts = l.attempts + 1,
       last_attempt_at = now(),
       error = NULL
RETURNING message_id::text;
