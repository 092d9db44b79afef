-- And one more reason a message is cancelled: 'frequency' (over the
-- per-user cap, it would wait past its period).
ALTER TABLE engagement_message_queue
    DROP CONSTRAINT IF EXISTS engagement_message_queue_cancel_reason_check,
    ADD CONSTRAINT engagement_message_queue_cancel_reason_check
        CHECK (cancel_reason IN ('opted_out', 'stale', 'no_user', 'operator', 'frequency')) NOT VALID;

-- Three more reasons a pending message waits past when it was due
-- (queue-process, issue 46): 'frequency' (its user got --per-user-cap
-- messages in the cap's window), 'quality' (a marketing message while
-- Meta rates the number red or flags it) and 'template_paused' (Meta
-- paused or disabled its template). Still NOT VALID: no scan of the bot's
-- table; only new rows are checked, as before.
ALTER TABLE engagement_message_queue
    DROP CONSTRAINT IF EXISTS engagement_message_queue_deferred_reason_check,
    ADD CONSTRAINT engagement_message_queue_deferred_reason_check
        CHECK (deferred_reason IN ('quiet_hours', 'budget', 'frequency', 'quality', 'template_paused')) NOT VALID;
