UPDATE engagement_message_queue SET cancel_reason = 'operator' WHERE cancel_reason = 'reachout_window';
ALTER TABLE engagement_message_queue
    DROP CONSTRAINT IF EXISTS engagement_message_queue_cancel_reason_check,
    ADD CONSTRAINT engagement_message_queue_cancel_reason_check
        CHECK (cancel_reason IN ('opted_out', 'stale', 'no_user', 'operator', 'frequency', 'erased', 'holdout',
                                 'us_marketing_blocked')) NOT VALID;
