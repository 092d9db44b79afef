-- Check time_zones_usable: every user_profiles.timezone that is set is one
-- PostgreSQL can read (engagement_zone(): any case, links, POSIX specs).
-- A value it cannot read is not replaced silently: quiet hours fall back
-- to the operator's --timezone for that user, and this check names them.
-- Each distinct value is looked up once. Nothing is exempt.
WITH unusable AS MATERIALIZED (
    SELECT timezone
      FROM (SELECT DISTINCT timezone FROM user_profiles WHERE btrim(timezone) <> '') z
     WHERE engagement_zone(z.timezone) IS NULL
), found (example) AS MATERIALIZED (
    SELECT p.user_id::text || ' (timezone ' || quote_literal(p.timezone) || ')'
      FROM user_profiles p
      JOIN unusable u ON u.timezone = p.timezone
)
SELECT count(*) AS violations,
       0::bigint AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
