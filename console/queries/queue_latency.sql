-- Send latency over the messages sent in the last @window up to @as_of:
-- from when each was (last) due to when it was sent.
SELECT count(*) AS sent,
       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM sent_at - scheduled_for)), 0) AS p50,
       coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM sent_at - scheduled_for)), 0) AS p95
  FROM engagement_message_queue
 WHERE status = 'sent'
   AND sent_at > @as_of::timestamptz - @window::interval AND sent_at <= @as_of::timestamptz;
