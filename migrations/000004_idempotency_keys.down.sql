DROP TABLE IF EXISTS engagement_idempotency_keys;
