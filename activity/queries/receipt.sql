-- One receipt of WhatsApp's for a message the scheduler sent (migration
-- 49's engagement_receipt): @status (sent, delivered, read, failed) of the
-- message whose provider id is @provider_message_id, as of @at (NULL:
-- now), with WhatsApp's @error_code for a failure (NULL: none). Returns
-- what is known of the message now, or NULL for an id none of the queue's.
--
-- nullable: @at, @error_code
SELECT engagement_receipt(@provider_message_id::text, @status::text, @at::timestamptz, @error_code::text) AS known
