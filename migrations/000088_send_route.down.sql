DROP FUNCTION IF EXISTS engagement_send_route(uuid);
