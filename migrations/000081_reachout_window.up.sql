-- One more reason a message is cancelled: on the webhook transport (an
-- unofficial WhatsApp client such as Baileys), a message to a user whose
-- last message to the bot is older than queue-process --reachout-window,
-- which WhatsApp refuses (error 463, the reach-out timelock; docs/baileys.md).
-- NOT VALID, as before: only new rows are checked.
ALTER TABLE engagement_message_queue
    DROP CONSTRAINT IF EXISTS engagement_message_queue_cancel_reason_check,
    ADD CONSTRAINT engagement_message_queue_cancel_reason_check
        CHECK (cancel_reason IN ('opted_out', 'stale', 'no_user', 'operator', 'frequency', 'erased', 'holdout',
                                 'us_marketing_blocked', 'reachout_window')) NOT VALID;
