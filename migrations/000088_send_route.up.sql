-- A user's profile as the jobs send by it, defined once (issue 60).
--
-- The daily steps and the weekly review each read the profile in a
-- LATERAL block of their own (three statements spelled out the opt-out,
-- the route and the skip reason; a fourth the opt-out alone). It is now
-- this function, which every one of them calls as
-- CROSS JOIN LATERAL engagement_send_route(s.user_id) p:
--
--   skip_reason      'opted_out' when the user opted out of re-engagement,
--                    else 'no_destination' when engagement_route (migration
--                    40) finds them no destination, else ''
--   opted_out        user_profiles.reengagement_opt_out
--   destination, destination_jid
--                    engagement_route's
--   timezone         user_profiles.timezone, as stored
--
-- No row when the user has no profile (every state row has one: a foreign
-- key).
--
-- A set-returning SQL function of one SELECT, STABLE, neither STRICT nor
-- SECURITY DEFINER and without SET clauses: the planner inlines it where a
-- statement calls it in FROM, so it costs what the spelled-out block cost
-- (scheduler's TestTheSendRouteIsInlined holds that no plan has a Function
-- Scan). Its OFFSET 0 keeps the inlined subquery whole, a primary-key
-- probe of user_profiles per user, as the blocks' own OFFSET 0 did: pulled
-- up into the statement, the planner hashed every profile for every chunk.
-- A column a caller does not use is not computed.
CREATE FUNCTION engagement_send_route(of_user uuid,
                                      OUT skip_reason text, OUT opted_out boolean,
                                      OUT destination text, OUT destination_jid text,
                                      OUT timezone text)
RETURNS SETOF record
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p.reengagement_opt_out THEN 'opted_out'
                WHEN route.destination_jid IS NULL THEN 'no_destination'
                ELSE '' END,
           p.reengagement_opt_out, route.destination, route.destination_jid, p.timezone
      FROM user_profiles p
     CROSS JOIN LATERAL engagement_route(p.preferred_destination, p.group_jid, p.whatsapp_jid) route
     WHERE p.user_id = of_user
    OFFSET 0
$$;

-- Closed to Supabase's Data API as migration 28 closes every function of
-- the scheduler's; deploy/sql/roles.sql grants it to the jobs.
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_send_route(uuid) FROM PUBLIC%s', coalesce(', ' || api, ''));
END
$$;
