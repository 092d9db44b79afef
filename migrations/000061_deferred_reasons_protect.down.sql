UPDATE engagement_message_queue
   SET deferred_reason = NULL
 WHERE deferred_reason IN ('frequency', 'quality', 'template_paused');
ALTER TABLE engagement_message_queue
    DROP CONSTRAINT IF EXISTS engagement_message_queue_deferred_reason_check,
    ADD CONSTRAINT engagement_message_queue_deferred_reason_check
        CHECK (deferred_reason IN ('quiet_hours', 'budget')) NOT VALID;
UPDATE engagement_message_queue
   SET cancel_reason = 'stale'
 WHERE cancel_reason = 'frequency';
ALTER TABLE engagement_message_queue
    DROP CONSTRAINT IF EXISTS engagement_message_queue_cancel_reason_check,
    ADD CONSTRAINT engagement_message_queue_cancel_reason_check
        CHECK (cancel_reason IN ('opted_out', 'stale', 'no_user', 'operator')) NOT VALID;
