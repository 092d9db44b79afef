-- Where a user's messages go, defined once.
--
-- The jobs, engagementctl enqueue and the weekly review's activity report
-- each spelled the rule out in their own SQL (eight statement files, issue
-- 35). It is now this function, which every one of them calls:
--
--   preferred_destination 'group' and a group_jid that is not blank
--                              → ('group', the group_jid, trimmed)
--   otherwise                  → ('individual', the whatsapp_jid, trimmed)
--
-- destination_jid is NULL when the chosen JID is missing or blank: the user
-- has nowhere to be sent to ("no destination").
--
-- A set-returning SQL function of one SELECT, STABLE at most and not
-- STRICT: the planner inlines it where a statement calls it in FROM
-- (CROSS JOIN LATERAL engagement_route(...) r), so it costs what the
-- spelled-out CASE cost.
CREATE FUNCTION engagement_route(preferred_destination text, group_jid text, whatsapp_jid text,
                                 OUT destination text, OUT destination_jid text)
RETURNS SETOF record
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN g THEN 'group' ELSE 'individual' END,
           nullif(btrim(CASE WHEN g THEN group_jid ELSE whatsapp_jid END), '')
      FROM (SELECT preferred_destination = 'group' AND coalesce(btrim(group_jid), '') <> '' AS g) AS r
$$;

-- Closed to Supabase's Data API as migration 28 closes every function of
-- the scheduler's.
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_route(text, text, text) FROM PUBLIC%s', coalesce(', ' || api, ''));
END
$$;
