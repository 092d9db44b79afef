DROP FUNCTION IF EXISTS engagement_route(text, text, text);
