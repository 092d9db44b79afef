-- The queue by type, destination and status, with how many distinct keys:
-- as many keys as messages, or something was queued twice.
SELECT message_type, destination, status, count(*) AS messages, count(DISTINCT idempotency_key) AS keys
  FROM engagement_message_queue GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
