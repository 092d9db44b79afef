DROP TABLE IF EXISTS engagement_queue_settings;
