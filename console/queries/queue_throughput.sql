-- Messages sent per hour over the last @hours hours up to @as_of (UTC
-- hours): the sent messages of the window counted by hour (through the
-- queue's sent_at index), then every hour of the window, zero or not.
-- not null: hour
WITH sent AS (
    SELECT date_trunc('hour', sent_at, 'UTC') AS hour, count(*) AS sent
      FROM engagement_message_queue
     WHERE status = 'sent'
       AND sent_at >= date_trunc('hour', @as_of::timestamptz, 'UTC') - (@hours::int - 1) * interval '1 hour'
       AND sent_at <= @as_of::timestamptz
     GROUP BY 1
)
SELECT h AS hour, coalesce(s.sent, 0) AS sent
  FROM generate_series(date_trunc('hour', @as_of::timestamptz, 'UTC') - (@hours::int - 1) * interval '1 hour',
                       date_trunc('hour', @as_of::timestamptz, 'UTC'), interval '1 hour') AS h
  LEFT JOIN sent s ON s.hour = h
 ORDER BY h;
