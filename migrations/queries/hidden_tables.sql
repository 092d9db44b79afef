-- The scheduler's tables (and the bot's it reads) whose rows row level
-- security hides from the current role: it is on for the role (not the
-- owner, no BYPASSRLS) and no policy applies to the role. Such a role reads
-- those tables as empty and would quietly do nothing, so every binary
-- refuses it (deploy/sql/roles.sql gives the jobs' role its policies).
SELECT c.relname::text AS table_name
  FROM pg_class c
 WHERE c.relnamespace = current_schema()::regnamespace
   AND c.relkind IN ('r', 'p')
   AND (c.relname LIKE 'engagement\_%'
        OR c.relname IN ('user_profiles', 'user_engagement_states', 'transactions'))
   AND has_table_privilege(c.oid, 'SELECT')
   AND row_security_active(c.oid)
   AND NOT EXISTS (SELECT
                     FROM pg_policy p
                    WHERE p.polrelid = c.oid
                      AND (0 = ANY(p.polroles)
                           OR EXISTS (SELECT FROM unnest(p.polroles) r WHERE pg_has_role(r, 'USAGE'))))
 ORDER BY 1
