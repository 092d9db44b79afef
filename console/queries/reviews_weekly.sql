-- Weekly reviews by the ISO week they cover (period_start), for the last
-- @weeks weeks up to @as_of: how many were queued and how many sent,
-- counted from the queue's (message_type, period_start) index alone.
-- not null: week_start
WITH bounds AS (
    SELECT date_trunc('week', @as_of::timestamptz, 'UTC') - (@weeks::int - 1) * interval '7 days' AS first_start
), reviews AS (
    SELECT q.period_start, count(*) AS queued, count(*) FILTER (WHERE q.status = 'sent') AS sent
      FROM engagement_message_queue q, bounds b
     WHERE q.message_type = @message_type::text
       AND q.period_start >= b.first_start AND q.period_start < b.first_start + @weeks::int * interval '7 days'
     GROUP BY q.period_start
)
SELECT b.first_start + w.i * interval '7 days' AS week_start,
       coalesce(r.queued, 0) AS queued, coalesce(r.sent, 0) AS sent
  FROM bounds b
 CROSS JOIN generate_series(0, @weeks::int - 1) AS w(i)
  LEFT JOIN reviews r ON r.period_start = b.first_start + w.i * interval '7 days'
 ORDER BY w.i;
