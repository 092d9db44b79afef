-- Meta's pricing of a message, from a status webhook's pricing object
-- (billable, category): the latest Meta said, on the message whose
-- provider id the status names (the index of migration 50). A provider id
-- that is none of the queue's (the bot's own conversation) changes
-- nothing; so does a repeat. Only the newest row of an id, as
-- engagement_receipt picks it.
UPDATE engagement_message_queue q
   SET billable = @billable::boolean,
       pricing_category = @category::text
 WHERE q.id = (SELECT m.id
                 FROM engagement_message_queue m
                WHERE m.provider_message_id = @provider_message_id::text
                ORDER BY m.created_at DESC
                LIMIT 1)
   AND (q.billable IS DISTINCT FROM @billable::boolean OR q.pricing_category IS DISTINCT FROM @category::text);
