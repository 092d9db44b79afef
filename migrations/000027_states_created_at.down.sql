-- Unless it is the bot's.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM engagement_adopted_tables
                    WHERE table_name = 'user_engagement_states' AND 'created_at' = ANY(columns)) THEN
        ALTER TABLE user_engagement_states DROP COLUMN IF EXISTS created_at;
    END IF;
END
$$;
