ALTER TABLE engagement_state_transitions DROP COLUMN IF EXISTS variant;
ALTER TABLE engagement_message_queue DROP COLUMN IF EXISTS variant;
