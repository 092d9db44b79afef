ALTER TABLE engagement_message_queue DROP COLUMN IF EXISTS replay_until;
ALTER TABLE engagement_message_queue DROP COLUMN IF EXISTS period_start;
