-- The bot's tables (engagement_adopted_tables) are never dropped, nor the
-- columns they had when they were adopted: only what this migration added.
DROP TABLE IF EXISTS engagement_state_transitions;
DROP TABLE IF EXISTS engagement_job_runs;
DO $$
DECLARE
    t text;
    adopted text[];
BEGIN
    FOREACH t IN ARRAY ARRAY['engagement_message_queue', 'transactions', 'user_engagement_states', 'user_profiles'] LOOP
        SELECT a.columns INTO adopted FROM engagement_adopted_tables a WHERE a.table_name = t;
        IF adopted IS NULL THEN
            EXECUTE format('DROP TABLE IF EXISTS %I', t);
        ELSIF t = 'user_profiles' AND NOT 'group_jid' = ANY(adopted) THEN
            ALTER TABLE user_profiles DROP COLUMN IF EXISTS group_jid;
        ELSIF t = 'user_engagement_states' AND NOT 'updated_at' = ANY(adopted) THEN
            ALTER TABLE user_engagement_states DROP COLUMN IF EXISTS updated_at;
        END IF;
    END LOOP;
END
$$;
DROP TABLE IF EXISTS engagement_adopted_tables;
