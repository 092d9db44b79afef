-- The pending messages: due now and how long the oldest has waited; held
-- back by quiet hours (never attempted, due later than they were queued:
-- queue-process moved them to the end of the quiet hours); waiting for a
-- retry (attempted before, due later).
SELECT count(*) FILTER (WHERE scheduled_for <= @as_of::timestamptz) AS due,
       min(scheduled_for) FILTER (WHERE scheduled_for <= @as_of::timestamptz) AS oldest_due,
       count(*) FILTER (WHERE scheduled_for > @as_of::timestamptz AND retry_count = 0
                          AND scheduled_for > created_at + interval '1 minute') AS quiet_hours,
       min(scheduled_for) FILTER (WHERE scheduled_for > @as_of::timestamptz AND retry_count = 0
                          AND scheduled_for > created_at + interval '1 minute') AS quiet_hours_until,
       count(*) FILTER (WHERE scheduled_for > @as_of::timestamptz AND retry_count > 0) AS retrying,
       count(*) FILTER (WHERE scheduled_for > @as_of::timestamptz) AS later
  FROM engagement_message_queue
 WHERE status = 'pending';
