DROP FUNCTION IF EXISTS engagement_fire(uuid, text, timestamptz, text);
DROP TABLE IF EXISTS engagement_fire_requests;
