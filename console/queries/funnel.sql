-- The goodbye funnel by weekly cohort: every goodbye (an @goodbye_trigger
-- move) logged in the last @weeks ISO weeks (UTC) up to @as_of, by the
-- week it was logged in, with
--   delivered    its message (the key the daily job gave it: user id,
--                @goodbye_infix, the run's as-of day) was sent; or, when
--                cleanup has deleted the message, the user answered it or
--                timed out on it (both only follow a delivery);
--   the outcome  the user's next move out of @goodbye_state, logged by
--                @as_of: an answer (help, remind later, not now), came
--                back on their own (@comeback_trigger), timed out, or
--                undelivered; none yet: still waiting;
--   reactivated  the user wrote again (@comeback_trigger, from any state)
--                within @window of the goodbye, by @as_of.
WITH bounds AS (
    SELECT date_trunc('week', @as_of::timestamptz, 'UTC') - (@weeks::int - 1) * interval '7 days' AS first_start
), goodbyes AS (
    SELECT g.id, g.user_id, g.created_at,
           ceil(extract(epoch FROM g.created_at - b.first_start) / 604800)::int - 1 AS w,
           g.user_id::text || @goodbye_infix::text
               || to_char(coalesce(r.as_of, g.created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS message_key
      FROM engagement_state_transitions g
      CROSS JOIN bounds b
      LEFT JOIN engagement_job_runs r ON r.id = g.job_run_id
     WHERE g.trigger = @goodbye_trigger::text
       AND g.created_at > b.first_start AND g.created_at <= @as_of::timestamptz
), episodes AS (
    SELECT g.w, o.trigger AS outcome, q.status AS message_status,
           EXISTS (SELECT FROM engagement_state_transitions c
                    WHERE c.user_id = g.user_id AND c.id > g.id AND c.trigger = @comeback_trigger::text
                      AND c.created_at <= least(g.created_at + @window::interval, @as_of::timestamptz)) AS reactivated
      FROM goodbyes g
      LEFT JOIN LATERAL (
           SELECT n.trigger
             FROM engagement_state_transitions n
            WHERE n.user_id = g.user_id AND n.id > g.id AND n.from_state = @goodbye_state::text
              AND n.created_at <= @as_of::timestamptz
            ORDER BY n.id
            LIMIT 1) o ON true
      LEFT JOIN engagement_message_queue q ON q.idempotency_key = g.message_key
)
SELECT b.first_start + w.i * interval '7 days' AS week_start,
       count(e.w) AS goodbyes,
       count(e.w) FILTER (WHERE e.message_status = 'sent'
                          OR (e.message_status IS NULL AND e.outcome = ANY (@delivered_outcomes::text[]))) AS delivered,
       count(e.w) FILTER (WHERE e.outcome = @answer_help::text) AS answered_help,
       count(e.w) FILTER (WHERE e.outcome = @answer_remind_later::text) AS answered_remind_later,
       count(e.w) FILTER (WHERE e.outcome = @answer_dormant::text) AS answered_not_now,
       count(e.w) FILTER (WHERE e.outcome = @comeback_trigger::text) AS came_back,
       count(e.w) FILTER (WHERE e.outcome = @timeout_trigger::text) AS timed_out,
       count(e.w) FILTER (WHERE e.outcome = @undelivered_trigger::text) AS undelivered,
       count(e.w) FILTER (WHERE e.outcome IS NULL) AS waiting,
       count(e.w) FILTER (WHERE e.reactivated) AS reactivated,
       b.first_start + (w.i + 1) * interval '7 days' + @window::interval <= @as_of::timestamptz AS window_closed
  FROM bounds b
 CROSS JOIN generate_series(0, @weeks::int - 1) AS w(i)
  LEFT JOIN episodes e ON e.w = w.i
 GROUP BY b.first_start, w.i
 ORDER BY w.i;
