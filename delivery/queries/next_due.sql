-- How long until the next pending message comes due on the processor's
-- clock, @clock_offset ahead of the database's (NULL: none is pending).
SELECT min(scheduled_for) - (now() + @clock_offset::interval) AS wait
  FROM engagement_message_queue
 WHERE status = 'pending';
