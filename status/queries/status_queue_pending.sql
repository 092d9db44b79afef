-- The pending messages at @as_of: those due, and since when the oldest has
-- waited; and those due later, each counted once, by why they wait:
--   held back by quiet hours: queue-process moved them to the end of the
--     quiet hours (deferred_reason 'quiet_hours'; a row deferred before the
--     column existed has none, and is one never attempted that is due later
--     than it was queued);
--   waiting on the send budget: moved down the budget's line
--     (deferred_reason 'budget'; the budget says when they go);
--   waiting for a retry: attempted before, due later, deferred by neither.
-- And the in-flight claims that are abandoned (their holder's lease ran
-- out): the next queue-process settles them. Both read the partial indexes
-- queue-process claims with. And the receipts kept for a send not recorded
-- yet (engagement_receipt_inbox, migration 65): a few, for seconds, while
-- sends are under way; the bot's own conversation's, until cleanup.
SELECT count(*) FILTER (WHERE scheduled_for <= @as_of::timestamptz) AS due,
       min(scheduled_for) FILTER (WHERE scheduled_for <= @as_of::timestamptz) AS oldest_due,
       count(*) FILTER (WHERE scheduled_for > @as_of::timestamptz
                          AND (deferred_reason = 'quiet_hours'
                               OR deferred_reason IS NULL AND retry_count = 0
                                  AND scheduled_for > created_at + interval '1 minute')) AS quiet_hours,
       min(scheduled_for) FILTER (WHERE scheduled_for > @as_of::timestamptz
                          AND (deferred_reason = 'quiet_hours'
                               OR deferred_reason IS NULL AND retry_count = 0
                                  AND scheduled_for > created_at + interval '1 minute')) AS quiet_hours_until,
       count(*) FILTER (WHERE scheduled_for > @as_of::timestamptz AND deferred_reason = 'budget') AS budget,
       count(*) FILTER (WHERE scheduled_for > @as_of::timestamptz AND retry_count > 0
                          AND deferred_reason IS NULL) AS retrying,
       count(*) FILTER (WHERE scheduled_for > @as_of::timestamptz) AS later,
       (SELECT count(*) FROM engagement_message_queue
         WHERE status = 'processing'
           AND engagement_claim_abandoned(claimed_by, claimed_until, @as_of::timestamptz)) AS expired_claims,
       (SELECT count(*) FROM engagement_receipt_inbox) AS kept_receipts
  FROM engagement_message_queue
 WHERE status = 'pending'
