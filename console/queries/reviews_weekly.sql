-- Weekly reviews by the ISO week they cover (period_start), for the last
-- @weeks weeks up to @as_of: how many were queued and how many sent.
WITH bounds AS (
    SELECT date_trunc('week', @as_of::timestamptz, 'UTC') - (@weeks::int - 1) * interval '7 days' AS first_start
)
SELECT b.first_start + w.i * interval '7 days' AS week_start,
       count(q.id) AS queued,
       count(q.id) FILTER (WHERE q.status = 'sent') AS sent
  FROM bounds b
 CROSS JOIN generate_series(0, @weeks::int - 1) AS w(i)
  LEFT JOIN engagement_message_queue q
         ON q.message_type = @message_type::text
        AND q.period_start = b.first_start + w.i * interval '7 days'
 GROUP BY b.first_start, w.i
 ORDER BY w.i;
