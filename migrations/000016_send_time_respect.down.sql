DROP TABLE IF EXISTS engagement_time_zones;
ALTER TABLE user_profiles DROP COLUMN IF EXISTS timezone;
ALTER TABLE engagement_message_queue DROP COLUMN IF EXISTS cancel_reason;
