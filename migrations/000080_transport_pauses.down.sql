DROP TABLE IF EXISTS engagement_transport_pauses;
