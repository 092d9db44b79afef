DROP TABLE IF EXISTS engagement_template_status; DROP TABLE IF EXISTS engagement_number_health;
