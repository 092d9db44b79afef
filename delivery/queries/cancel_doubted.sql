-- Cancel @id, which @holder holds, with @reason, nothing having been sent:
-- a message in doubt (its request may have reached the receiver before a
-- crash) that is no longer wanted, and that the receiver said it never
-- had (a lookup, which also spent its key there, so the lost request
-- cannot arrive later), its doubt over; or a message whose request the
-- transport would be refused before it is made (us_marketing_blocked).
-- Returns the id when it was still held.
UPDATE engagement_message_queue
   SET status = 'cancelled',
       cancel_reason = @reason,
       in_doubt = false,
       claimed_by = NULL,
       claimed_until = NULL
 WHERE id = @id::uuid
   AND status = 'processing'
   AND claimed_by = @holder
RETURNING id::text;
