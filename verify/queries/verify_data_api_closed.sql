-- Check data_api_closed: no table, sequence or function of the scheduler's
-- can be reached by Supabase's Data API roles anon and authenticated
-- (PostgREST runs every request as one of them; migration 28 closes
-- everything to them). The scheduler's: the current schema's relations
-- named engagement_*, user_profiles, user_engagement_states and
-- transactions, unless engagement_adopted_tables lists them (the bot's
-- tables are the bot's), and engagement_message_queue always, adopted or
-- not (a row anyone can insert there is a WhatsApp message the bot sends);
-- its functions named engagement_*. Only a role that exists and may use the
-- schema (USAGE) reaches anything, so on a plain PostgreSQL without those
-- roles the check passes. A role reaches
--   a table when it holds SELECT, INSERT, UPDATE or DELETE on it and row
--     level security does not stop it: off on the table (or a view), the
--     role bypasses it or owns the table (without FORCE), or a permissive
--     policy for the command applies to the role (or one it is a member of)
--     or to PUBLIC;
--   a sequence when it holds USAGE, SELECT or UPDATE on it;
--   a function when it may EXECUTE it, SECURITY DEFINER (runs as its owner,
--     past row level security) or plain, each example saying which.
-- One row per object and role, the example naming both and why. Exempt: a
-- table a role holds privileges on that row level security keeps closed
-- to it (no policy applies), as the bot's adopted queue with the
-- privileges Supabase grants by default. See verify_goodbye_queued.sql for
-- the statement's shape.
WITH api (role, name, bypassrls) AS MATERIALIZED (
    SELECT r.oid, r.rolname::text, r.rolbypassrls
      FROM pg_roles r
     WHERE r.rolname IN ('anon', 'authenticated')
       AND has_schema_privilege(r.oid, current_schema(), 'USAGE')
), mine AS MATERIALIZED (
    SELECT c.oid, c.relname::text AS name, c.relkind, c.relrowsecurity, c.relforcerowsecurity, c.relowner
      FROM pg_class c
     WHERE c.relnamespace = current_schema()::regnamespace
       AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
       AND (c.relname = 'engagement_message_queue'
            OR ((c.relname LIKE 'engagement\_%'
                 OR c.relname IN ('user_profiles', 'user_engagement_states', 'transactions'))
                AND c.relname NOT IN (SELECT table_name FROM engagement_adopted_tables)))
), policies AS MATERIALIZED (
    SELECT m.oid AS relid, a.role, p.polname::text AS policy,
           CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT'
                         WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END AS cmd,
           CASE WHEN 0::oid = ANY (p.polroles) THEN 'PUBLIC' ELSE a.name END AS target
      FROM mine m
      JOIN pg_policy p ON p.polrelid = m.oid AND p.polpermissive
     CROSS JOIN api a
     WHERE EXISTS (SELECT 1 FROM unnest(p.polroles) AS t (r)
                    WHERE CASE WHEN t.r = 0::oid THEN true ELSE pg_has_role(a.role, t.r, 'MEMBER') END)
), tables (example, exempt) AS (
    SELECT m.name || ': ' || a.name || ' may ' || array_to_string(coalesce(o.cmds, h.cmds), ', ') || ', ' ||
           coalesce(w.reason, o.reason),
           w.reason IS NULL AND o.cmds IS NULL
      FROM mine m
     CROSS JOIN api a
     CROSS JOIN LATERAL (
           SELECT array_agg(c.p ORDER BY c.o)
             FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) WITH ORDINALITY AS c (p, o)
            WHERE has_table_privilege(a.role, m.oid, c.p)) h (cmds)
     CROSS JOIN LATERAL (
           SELECT CASE WHEN m.relkind = 'v' THEN 'a view, which row level security does not guard'
                       WHEN m.relkind = 'm' THEN 'a materialized view, which row level security does not guard'
                       WHEN m.relkind = 'f' THEN 'a foreign table, which row level security does not guard'
                       WHEN NOT m.relrowsecurity THEN 'row level security off'
                       WHEN a.bypassrls THEN 'row level security on, but ' || a.name || ' bypasses it'
                       WHEN NOT m.relforcerowsecurity AND pg_has_role(a.role, m.relowner, 'USAGE')
                       THEN 'row level security on, but ' || a.name || ' owns the table'
                  END) w (reason)
     CROSS JOIN LATERAL (
           SELECT array_agg(c.p ORDER BY c.o),
                  (SELECT 'row level security on, but ' ||
                          string_agg(DISTINCT 'policy ' || quote_ident(pol.policy) || ' (' || pol.cmd || ') applies to ' || pol.target, '; ')
                     FROM policies pol
                    WHERE pol.relid = m.oid AND pol.role = a.role AND (pol.cmd = 'ALL' OR pol.cmd = ANY (h.cmds)))
             FROM unnest(h.cmds) WITH ORDINALITY AS c (p, o)
            WHERE EXISTS (SELECT 1 FROM policies pol
                           WHERE pol.relid = m.oid AND pol.role = a.role AND pol.cmd IN (c.p, 'ALL'))) o (cmds, reason)
     WHERE m.relkind <> 'S' AND h.cmds IS NOT NULL
), sequences (example, exempt) AS (
    SELECT m.name || ': ' || a.name || ' may ' || array_to_string(h.cmds, ', ') || ' the sequence', false
      FROM mine m
     CROSS JOIN api a
     CROSS JOIN LATERAL (
           SELECT array_agg(c.p ORDER BY c.o)
             FROM unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) WITH ORDINALITY AS c (p, o)
            WHERE has_sequence_privilege(a.role, m.oid, c.p)) h (cmds)
     WHERE m.relkind = 'S' AND h.cmds IS NOT NULL
), functions (example, exempt) AS (
    SELECT p.oid::regprocedure::text || ': ' || a.name || ' may EXECUTE, ' ||
           CASE WHEN p.prosecdef THEN 'SECURITY DEFINER (runs as its owner, past row level security)'
                ELSE 'a plain function (SECURITY INVOKER: runs as its caller)' END,
           false
      FROM pg_proc p
     CROSS JOIN api a
     WHERE p.pronamespace = current_schema()::regnamespace
       AND p.proname LIKE 'engagement\_%'
       AND has_function_privilege(a.role, p.oid, 'EXECUTE')
), found (example, exempt) AS MATERIALIZED (
    SELECT example, exempt FROM tables
    UNION ALL
    SELECT example, exempt FROM sequences
    UNION ALL
    SELECT example, exempt FROM functions
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
