-- Hand messages that @holder claimed and did not send back to the queue,
-- untouched: no attempt is counted and no retry spent, and they are due as
-- they were. Only claims it still holds; rows are locked in id order, the
-- one order every statement on claimed rows takes. Returns the ids handed
-- back: only those may give their send budget slots back (a claim lost
-- meanwhile is its new holder's, or recovery's, which keeps the slot of a
-- message in doubt).
WITH mine AS (
    SELECT id
      FROM engagement_message_queue
     WHERE id = ANY(@ids::uuid[])
       AND status = 'processing'
       AND claimed_by = @holder
     ORDER BY id
       FOR UPDATE
)
UPDATE engagement_message_queue q
   SET status = 'pending',
       claimed_until = NULL,
       claimed_by = NULL
  FROM mine
 WHERE q.id = mine.id
RETURNING q.id::text;
