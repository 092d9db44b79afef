-- Start an attempt at sending message @id, only while @holder still holds
-- its claim and is alive (the fencing check, in the same statement as the
-- start): the send ledger records the attempt as started ('processing',
-- one more attempt) before the external call. No row comes back when the
-- claim was lost: the message must not be sent.
--
-- A Cloud API send (@meta_category: the template's latest Meta category
-- the request is routed by, lower-case; '' on other transports) records
-- it, and whether the user's customer service window is open at the
-- request (their last message, user_engagement_states.last_activity_at,
-- against the processor's clock: @clock_offset ahead of the database's):
-- what Meta counts and bills the send by (migration 73).
WITH held AS (
    UPDATE engagement_message_queue
       SET claimed_until = now() + @claim_timeout::interval
     WHERE id = @id
       AND status = 'processing'
       AND claimed_by = @holder
       AND NOT engagement_claim_abandoned(claimed_by, claimed_until, now())
    RETURNING id, user_id
)
INSERT INTO engagement_processed_messages AS l (message_id, transport, status, attempts, meta_category, service_window)
SELECT h.id, @transport, 'processing', 1, nullif(@meta_category::text, ''),
       CASE WHEN @meta_category::text <> '' THEN
           engagement_service_window_open((SELECT s.last_activity_at FROM user_engagement_states s WHERE s.user_id = h.user_id),
                                          now() + @clock_offset::interval)
       END
  FROM held h
    ON CONFLICT (message_id, transport) DO UPDATE
   SET status = 'processing',
       attempts = l.attempts + 1,
       last_attempt_at = now(),
       error = NULL,
       meta_category = EXCLUDED.meta_category,
       service_window = EXCLUDED.service_window
RETURNING message_id::text;
