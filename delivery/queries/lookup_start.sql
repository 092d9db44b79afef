-- Note, before asking the receiver whether it had @id (a message in doubt
-- that is no longer wanted, doubt.go), that a lookup is made: in the send
-- ledger's looked_up_at, fenced on @holder's claim. A lookup spends the
-- message's key at the receiver without sending, so a later lookup (this
-- one's answer lost to a crash) that is answered "a repeat" may be hearing
-- this lookup's own trace, not a send. Returns whether a lookup was made
-- before this one; no row when @holder no longer holds @id.
WITH held AS (
    SELECT q.id
      FROM engagement_message_queue q
     WHERE q.id = @id::uuid
       AND q.status = 'processing'
       AND q.claimed_by = @holder
), earlier AS (
    SELECT l.looked_up_at IS NOT NULL AS looked_up
      FROM engagement_processed_messages l
     WHERE l.message_id = @id::uuid
       AND l.transport = @transport
)
INSERT INTO engagement_processed_messages AS l (message_id, transport, status, attempts, looked_up_at)
SELECT h.id, @transport, 'failed', 0, now()
  FROM held h
    ON CONFLICT (message_id, transport) DO UPDATE
   SET looked_up_at = now()
RETURNING coalesce((SELECT looked_up FROM earlier), false) AS earlier;
