-- Send-time respect: why a queued message was cancelled instead of sent,
-- and the user's own time zone for quiet hours.

-- 'opted_out', 'stale', 'no_user' (set when a message is claimed and no
-- longer wanted) or 'operator' (engagementctl cancel). NULL otherwise.
ALTER TABLE engagement_message_queue
    ADD COLUMN cancel_reason text
        CHECK (cancel_reason IN ('opted_out', 'stale', 'no_user', 'operator'));

-- An IANA zone such as 'America/Sao_Paulo'; NULL or empty: the operator's
-- --timezone. An unknown name falls back to it too.
-- (The bot's profiles may have one already: it is used as it is.)
ALTER TABLE user_profiles
    ADD COLUMN IF NOT EXISTS timezone text;

-- The time zones PostgreSQL knows, for the claim to look a user's zone up
-- in: an empty or unknown user_profiles.timezone falls back to the
-- operator's zone rather than fail the claim. (pg_timezone_names reads the
-- whole zone database, about 200 ms, on every call.) A zone that a later
-- PostgreSQL release adds counts as unknown until a migration refreshes
-- this table.
CREATE TABLE engagement_time_zones (
    name text PRIMARY KEY
);
INSERT INTO engagement_time_zones (name) SELECT name FROM pg_timezone_names ON CONFLICT DO NOTHING;
