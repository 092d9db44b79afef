-- How many messages @holder still holds (in flight, claimed by it): what a
-- processor that could not hand back its claims as it stopped leaves to
-- recovery.
SELECT count(*)::int AS claims
  FROM engagement_message_queue
 WHERE status = 'processing' AND claimed_by = @holder::text;
