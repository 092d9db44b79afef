-- How long until the next pending message comes due (NULL: none is pending).
SELECT min(scheduled_for) - now()
  FROM engagement_message_queue
 WHERE status = 'pending';
