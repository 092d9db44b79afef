-- The oldest goodbye or reminder the queue keeps when they alone are more
-- than the messages asked for: the (@offset + 1)th newest.
SELECT u.ts[k] AS at, u.user_id::text AS user_id
  FROM consoledata.users u
 CROSS JOIN LATERAL generate_subscripts(u.tr, 1) AS k
 WHERE u.tr[k] = 1 OR (u.tr[k] = 4 AND NOT u.opt AND pg_temp.cd_run(u.ts[k]) >= @reminders_since::timestamptz)
 ORDER BY u.ts[k] DESC, u.user_id DESC
OFFSET @offset LIMIT 1
