-- Nothing the scheduler creates is reachable through Supabase's Data API.
--
-- On Supabase, PostgREST runs every request as the role anon (the public
-- key) or authenticated (a signed-in end user), and the project's default
-- privileges grant every new table, sequence and function in public to
-- them. A table without row level security is then readable and writable
-- by anyone holding the public key; a row inserted into the queue is a
-- WhatsApp message the bot sends. So, on every table, sequence and
-- function of the scheduler's (the engagement_* ones, and the bot's four
-- tables where the scheduler created them rather than adopted them):
--
--   * row level security is on, with no policy: only the owner (the role
--     that ran the migrations) and roles with BYPASSRLS see rows; the
--     jobs' own role gets a policy of its own from deploy/sql/roles.sql;
--   * anon and authenticated hold no privilege (PUBLIC neither, on the
--     functions): a grant alone would not pass row level security, but
--     two locks are better than one, and a function runs without it.
--
-- The bot's adopted tables are not touched: their row level security,
-- grants and policies stay the bot's. service_role, the bot's backend key,
-- already bypasses row level security and keeps its grants.
-- engagementctl verify's data_api_closed check reports any regression.
-- Every later migration that creates a table or a function does the same
-- for it (docs/development.md).
DO $$
DECLARE
    api    text := (SELECT string_agg(quote_ident(rolname), ', ')
                      FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
    -- Read whole before the loop alters them (an open scan would forbid it).
    tables regclass[] := ARRAY(
        SELECT c.oid::regclass
          FROM pg_class c
         WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
           AND (c.relname LIKE 'engagement\_%'
                OR c.relname IN ('user_profiles', 'user_engagement_states', 'transactions'))
           AND c.relname NOT IN (SELECT table_name FROM engagement_adopted_tables));
    t      regclass;
    s      regclass;
    f      regprocedure;
BEGIN
    FOREACH t IN ARRAY tables
    LOOP
        EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', t);
        IF api IS NOT NULL THEN
            EXECUTE format('REVOKE ALL ON TABLE %s FROM %s', t, api);
        END IF;
    END LOOP;
    IF api IS NOT NULL THEN
        FOR s IN
            SELECT c.oid::regclass
              FROM pg_class c
             WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'S'
               AND c.relname LIKE 'engagement\_%'
        LOOP
            EXECUTE format('REVOKE ALL ON SEQUENCE %s FROM %s', s, api);
        END LOOP;
    END IF;
    FOR f IN
        SELECT p.oid::regprocedure
          FROM pg_proc p
         WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'engagement\_%'
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC%s', f, coalesce(', ' || api, ''));
    END LOOP;
END
$$;
