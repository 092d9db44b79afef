-- An opt-out's confirmation (issue 44): "you will get no more of these",
-- the catalog's engagement.opt_out.confirmation, off by default. The bot
-- (or an operator) asks for it with engagement_opt_out's p_confirm; the
-- message kind opt_out_confirmation (statemachine's kinds table) is the
-- one kind the claim sends only while its user is still opted out.
--
-- engagement_opt_out gains p_confirm (default false: callers of the
-- four-argument form keep their meaning). When the call changes the user's
-- consent, p_confirm is true and the opt-out was said within the last 24
-- hours (the customer service window the user's own message opened; an
-- opt-out replayed from older history gets no answer days late), it queues
-- the confirmation in the same statement, to the user's route
-- (engagement_route, migration 40), under the key
-- {user_id}:opt_out_confirmation:{the opt-out's instant in Unix
-- milliseconds}: statemachine's Kind.Key for the kind. A user without a
-- route gets none. The call that changes nothing queues nothing.
-- Renamed, not dropped, until the new one holds its grants: a bot role
-- given EXECUTE by deploy/sql/roles.sql keeps it across the migration.
ALTER FUNCTION engagement_opt_out(uuid, text, timestamptz, text) RENAME TO engagement_opt_out_old;

CREATE FUNCTION engagement_opt_out(p_user_id uuid, p_source text, p_at timestamptz DEFAULT NULL, p_actor text DEFAULT NULL,
                                   p_confirm boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    at timestamptz := coalesce(p_at, now());
BEGIN
    IF NOT engagement_consent(p_user_id, true, p_source, p_at, p_actor) THEN
        RETURN false;
    END IF;
    IF p_confirm AND at > now() - interval '24 hours' THEN
        INSERT INTO engagement_message_queue
               (user_id, message_type, message_key, destination, destination_jid,
                scheduled_for, idempotency_key, period_start, replay_until)
        SELECT p.user_id, 'opt_out_confirmation', 'engagement.opt_out.confirmation', r.destination, r.destination_jid,
               now(), p.user_id::text || ':opt_out_confirmation:' || floor(extract(epoch FROM at) * 1000)::bigint,
               at, at
          FROM user_profiles p
         CROSS JOIN LATERAL engagement_route(p.preferred_destination, p.group_jid, p.whatsapp_jid) r
         WHERE p.user_id = p_user_id AND r.destination_jid IS NOT NULL
        ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
    END IF;
    RETURN true;
END
$$;

DO $$
DECLARE
    api     text := (SELECT string_agg(quote_ident(rolname), ', ')
                       FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
    grantee text;
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_opt_out(uuid, text, timestamptz, text, boolean) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_opt_out(uuid, text, timestamptz, text, boolean) FROM PUBLIC%s', coalesce(', ' || api, ''));
    FOR grantee IN
        SELECT a.grantee::regrole::text
          FROM pg_proc f, aclexplode(f.proacl) a
         WHERE f.oid = 'engagement_opt_out_old(uuid, text, timestamptz, text)'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> f.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION engagement_opt_out(uuid, text, timestamptz, text, boolean) TO %s', grantee);
    END LOOP;
END
$$;

DROP FUNCTION engagement_opt_out_old(uuid, text, timestamptz, text);
