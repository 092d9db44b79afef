DROP FUNCTION IF EXISTS engagement_error_group(text);
DROP TABLE IF EXISTS engagement_console_audit;
