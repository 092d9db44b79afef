-- A group's JID finds its members in the console's user search (see
-- migration 46). Built CONCURRENTLY, in a file of its own.
CREATE INDEX CONCURRENTLY IF NOT EXISTS engagement_user_profiles_group_jid_idx
    ON user_profiles (group_jid) WHERE group_jid IS NOT NULL;
