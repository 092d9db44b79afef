DROP TABLE IF EXISTS engagement_time_zones;
-- Unless the bot's profiles had a timezone column of their own.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM engagement_adopted_tables
                    WHERE table_name = 'user_profiles' AND 'timezone' = ANY(columns)) THEN
        ALTER TABLE user_profiles DROP COLUMN IF EXISTS timezone;
    END IF;
END
$$;
ALTER TABLE engagement_message_queue DROP COLUMN IF EXISTS cancel_reason;
