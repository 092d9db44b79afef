-- Users whose user_profiles.timezone PostgreSQL cannot read
-- (engagement_zone() is NULL for it): their quiet hours fall back to the
-- operator's --timezone. Each distinct value is looked up once.
SELECT coalesce(sum(n), 0)::bigint AS unusable_time_zones
  FROM (SELECT timezone, count(*) AS n
          FROM user_profiles
         WHERE btrim(timezone) <> ''
         GROUP BY timezone) z
 WHERE engagement_zone(z.timezone) IS NULL
