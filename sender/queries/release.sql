-- Hand messages that @holder claimed and did not send back to the queue,
-- untouched (no attempt is counted). Only claims it still holds.
UPDATE engagement_message_queue
   SET status = 'pending',
       claimed_until = NULL,
       claimed_by = NULL
 WHERE id = ANY(@ids::uuid[])
   AND status = 'processing'
   AND claimed_by = @holder;
