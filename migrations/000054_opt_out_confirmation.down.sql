-- engagement_opt_out as migration 52 made it: no confirmation.
-- Renamed, not dropped, until the new one holds its grants: a bot role
-- given EXECUTE by deploy/sql/roles.sql keeps it across the migration.
ALTER FUNCTION engagement_opt_out(uuid, text, timestamptz, text, boolean) RENAME TO engagement_opt_out_old;

CREATE FUNCTION engagement_opt_out(p_user_id uuid, p_source text, p_at timestamptz DEFAULT NULL, p_actor text DEFAULT NULL)
RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
AS $$ SELECT engagement_consent(p_user_id, true, p_source, p_at, p_actor) $$;

DO $$
DECLARE
    api     text := (SELECT string_agg(quote_ident(rolname), ', ')
                       FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
    grantee text;
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_opt_out(uuid, text, timestamptz, text) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_opt_out(uuid, text, timestamptz, text) FROM PUBLIC%s', coalesce(', ' || api, ''));
    FOR grantee IN
        SELECT a.grantee::regrole::text
          FROM pg_proc f, aclexplode(f.proacl) a
         WHERE f.oid = 'engagement_opt_out_old(uuid, text, timestamptz, text, boolean)'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> f.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION engagement_opt_out(uuid, text, timestamptz, text) TO %s', grantee);
    END LOOP;
END
$$;

DROP FUNCTION engagement_opt_out_old(uuid, text, timestamptz, text, boolean);
