-- A user's time zone, however PostgreSQL would read it.
--
-- Quiet hours looked user_profiles.timezone up exactly in
-- engagement_time_zones, so 'asia/kathmandu' or a POSIX spec such as
-- '<+0545>-05:45' (both of which AT TIME ZONE accepts) silently fell back
-- to the operator's --timezone. engagement_zone() answers with the name to
-- use, or NULL when PostgreSQL cannot use the value at all (status and
-- verify count those users; the claim still falls back for them):
--   1. a zone name of the zone database, in any case, with or without
--      surrounding blanks, links included ('Asia/Katmandu', 'US/Eastern'):
--      an index lookup in engagement_time_zones, which pg_timezone_names
--      fills with links too;
--   2. anything else AT TIME ZONE accepts (POSIX specs, abbreviations such
--      as 'BRT'): tried once, inside a block that catches the error. Only
--      values outside the zone database take this slower path.

-- Names a newer tzdata added since migration 16.
INSERT INTO engagement_time_zones (name) SELECT name FROM pg_timezone_names ON CONFLICT DO NOTHING;

CREATE INDEX engagement_time_zones_lower_idx ON engagement_time_zones (lower(name));

CREATE FUNCTION engagement_zone(zone text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    z     text := btrim(zone);
    known text;
BEGIN
    IF z IS NULL OR z = '' THEN
        RETURN NULL;
    END IF;
    SELECT t.name INTO known
      FROM engagement_time_zones t
     WHERE lower(t.name) = lower(z)
     ORDER BY t.name = z DESC, t.name
     LIMIT 1;
    IF known IS NOT NULL THEN
        RETURN known;
    END IF;
    BEGIN
        PERFORM now() AT TIME ZONE z;
        RETURN z;
    EXCEPTION WHEN data_exception THEN -- 22023: time zone "…" not recognized
        RETURN NULL;
    END;
END
$$;
