-- How many pending messages are due at @as_of and since when the oldest
-- has waited, and how many in-flight claims are abandoned (their holder's
-- lease ran out). All
-- three use the partial indexes queue-process claims with.
--
-- nullable: oldest_due_pending_at
SELECT (SELECT count(*) FROM engagement_message_queue
         WHERE status = 'pending' AND scheduled_for <= @as_of) AS due_pending,
       (SELECT min(scheduled_for) FROM engagement_message_queue
         WHERE status = 'pending' AND scheduled_for <= @as_of) AS oldest_due_pending_at,
       (SELECT count(*) FROM engagement_message_queue
         WHERE status = 'processing' AND engagement_claim_abandoned(claimed_by, claimed_until, @as_of)) AS expired_claims
