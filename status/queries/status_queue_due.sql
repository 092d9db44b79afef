-- How many pending messages are due at @as_of and since when the oldest
-- has waited, and how many in-flight claims are abandoned (their holder's
-- lease ran out). All
-- three use the partial indexes queue-process claims with.
SELECT (SELECT count(*) FROM engagement_message_queue
         WHERE status = 'pending' AND scheduled_for <= @as_of),
       (SELECT min(scheduled_for) FROM engagement_message_queue
         WHERE status = 'pending' AND scheduled_for <= @as_of),
       (SELECT count(*) FROM engagement_message_queue
         WHERE status = 'processing' AND engagement_claim_abandoned(claimed_by, claimed_until, @as_of))
