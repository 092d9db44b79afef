-- Messages by status and kind.
SELECT status, message_type AS kind, count(*) AS messages
  FROM engagement_message_queue
 GROUP BY status, message_type
 ORDER BY message_type, status;
