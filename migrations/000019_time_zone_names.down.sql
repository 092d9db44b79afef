DROP FUNCTION IF EXISTS engagement_zone(text);
DROP INDEX IF EXISTS engagement_time_zones_lower_idx;
