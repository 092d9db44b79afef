-- Send-time respect: why a queued message was cancelled instead of sent,
-- and the user's own time zone for quiet hours.

-- 'opted_out', 'stale', 'no_user' (set when a message is claimed and no
-- longer wanted) or 'operator' (engagementctl cancel). NULL otherwise.
ALTER TABLE engagement_message_queue
    ADD COLUMN cancel_reason text
        CHECK (cancel_reason IN ('opted_out', 'stale', 'no_user', 'operator'));

-- An IANA zone such as 'America/Sao_Paulo'; NULL or empty: the operator's
-- --timezone. An unknown name falls back to it too.
ALTER TABLE user_profiles
    ADD COLUMN timezone text;

-- engagement_known_zone returns zone when PostgreSQL knows it as a time
-- zone, else NULL: the claim falls back to the operator's zone for a user
-- whose timezone is empty or unknown, rather than fail. (A lookup in
-- pg_timezone_names reads the whole zone database on every call.)
CREATE FUNCTION engagement_known_zone(zone text) RETURNS text
    LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
BEGIN
    IF zone IS NULL OR btrim(zone) = '' THEN
        RETURN NULL;
    END IF;
    PERFORM now() AT TIME ZONE zone;
    RETURN zone;
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN NULL;
END
$$;
