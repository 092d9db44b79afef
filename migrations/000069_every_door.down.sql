-- Back to one rule per door: messages are checked by their kind alone again.
DROP TRIGGER IF EXISTS engagement_confirmation_guard ON engagement_message_queue;
DROP FUNCTION IF EXISTS engagement_confirmation_guard();
DROP FUNCTION IF EXISTS engagement_refusal(text, boolean, boolean, boolean);
ALTER TABLE user_engagement_states DROP COLUMN IF EXISTS goodbye_holdout;
DROP TABLE IF EXISTS engagement_erasures;
DROP TABLE IF EXISTS engagement_message_types;
UPDATE engagement_message_queue SET cancel_reason = 'opted_out' WHERE cancel_reason IN ('erased', 'holdout');
ALTER TABLE engagement_message_queue
    DROP CONSTRAINT IF EXISTS engagement_message_queue_cancel_reason_check,
    ADD CONSTRAINT engagement_message_queue_cancel_reason_check
        CHECK (cancel_reason IN ('opted_out', 'stale', 'no_user', 'operator', 'frequency')) NOT VALID;
