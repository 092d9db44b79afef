-- Queued messages by status and type, the statuses in the order of
-- @statuses (the known ones; others after them, by name).
SELECT status, message_type, count(*) AS messages
  FROM engagement_message_queue
 GROUP BY status, message_type
 ORDER BY array_position(@statuses::text[], status), status, message_type
