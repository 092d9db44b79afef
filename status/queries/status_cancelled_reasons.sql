-- Cancelled messages by cancel_reason; those without one count under
-- @unspecified.
SELECT coalesce(cancel_reason, @unspecified::text) AS reason, count(*) AS messages
  FROM engagement_message_queue
 WHERE status = 'cancelled'
 GROUP BY 1
