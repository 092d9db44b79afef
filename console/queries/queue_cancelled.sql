-- Cancelled messages by why they were not sent.
SELECT coalesce(cancel_reason, '') AS reason, count(*) AS messages
  FROM engagement_message_queue
 WHERE status = 'cancelled'
 GROUP BY 1
 ORDER BY 2 DESC;
