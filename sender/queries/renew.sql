-- Extend the claims that @holder still holds among @ids: a live process
-- keeps its claims while it works on them, however slow the receiver.
UPDATE engagement_message_queue
   SET claimed_until = now() + @claim_timeout::interval
 WHERE id = ANY(@ids::uuid[])
   AND status = 'processing'
   AND claimed_by = @holder
RETURNING id::text;
