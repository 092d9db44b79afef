-- Messages sent per hour over the last @hours hours up to @as_of (UTC hours).
SELECT h AS hour, count(q.id) AS sent
  FROM generate_series(date_trunc('hour', @as_of::timestamptz, 'UTC') - (@hours::int - 1) * interval '1 hour',
                       date_trunc('hour', @as_of::timestamptz, 'UTC'), interval '1 hour') AS h
  LEFT JOIN engagement_message_queue q
         ON q.status = 'sent' AND q.sent_at >= h AND q.sent_at < h + interval '1 hour'
        AND q.sent_at <= @as_of::timestamptz
 GROUP BY h
 ORDER BY h;
