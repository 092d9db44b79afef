-- The goodbye's timing arms by weekly cohort (issue 61): the treated
-- goodbyes (not held out) of the last @weeks ISO weeks (UTC) up to @as_of
-- whose log row says which timing arm their user was assigned
-- (engagement-daily --best-hour-percent, migration 84: 'best_hour' or
-- 'run_time', by user id, intent to treat: a best-hour user whose hour is
-- not known yet stays in the best-hour arm). The cohorts are
-- funnel_arms.sql's: a user counts once per week, by their first goodbye
-- of the week, in the arm that goodbye's row recorded; a week's first
-- goodbye without a timing (a run without the flag) is in no arm.
--
--   users         the cohort's users in the arm;
--   answered_48h  of them, those who answered the goodbye (@answer_triggers:
--                 the first move out of goodbye_sent after it is an
--                 answer) within @answer_window of its send: the goodbye
--                 message's sent_at (the message the same run queued for
--                 the user, kind @goodbye_kind), or the log row's time
--                 when no such message is left (cleaned up, never sent).
--                 From the send, not the run: a best-hour goodbye leaves
--                 up to a day after the run, and counting from the run
--                 would give its user less time to answer;
--   reactivated   of them, those who wrote again (@comeback_trigger, from
--                 any state) after that goodbye and within @window of it,
--                 by @as_of: funnel_arms.sql's definition.
--
-- One row per cohort week with timed goodbyes and arm. Set-based as
-- funnel_arms.sql: the goodbyes, returns and moves out of @goodbye_state
-- come from the log's indexes, the sends from the queue's (message_type,
-- period_start) index, and they meet by user in joins.
--
-- not null: timing
WITH bounds AS (
    SELECT date_trunc('week', @as_of::timestamptz, 'UTC') - (@weeks::int - 1) * interval '7 days' AS first_start
), firsts AS MATERIALIZED (
    SELECT DISTINCT ON (w.w, g.user_id) g.id, g.user_id, g.created_at, g.holdout, g.timing, g.job_run_id, w.w
      FROM engagement_state_transitions g
     CROSS JOIN bounds b
     CROSS JOIN LATERAL (
           SELECT floor(extract(epoch FROM g.created_at - b.first_start) / 604800)::int AS w
     ) w
     WHERE g.trigger = @goodbye_trigger::text
       AND g.created_at >= b.first_start AND g.created_at <= @as_of::timestamptz
     ORDER BY w.w, g.user_id, g.id
), goodbyes AS MATERIALIZED (
    SELECT f.id, f.user_id, f.created_at, f.timing, f.job_run_id, f.w
      FROM firsts f
     WHERE f.timing IS NOT NULL AND NOT f.holdout
), sends AS (
    SELECT q.user_id, q.job_run_id, min(q.sent_at) AS sent_at
      FROM engagement_message_queue q, bounds b
     WHERE q.message_type = @goodbye_kind::text
       AND q.period_start >= b.first_start - interval '1 day' AND q.period_start <= @as_of::timestamptz
       AND q.sent_at IS NOT NULL AND q.job_run_id IS NOT NULL
     GROUP BY q.user_id, q.job_run_id
), clocks AS (
    SELECT g.id, coalesce(s.sent_at, g.created_at) AS sent_at
      FROM goodbyes g
      LEFT JOIN sends s ON s.user_id = g.user_id AND s.job_run_id = g.job_run_id
), exits AS MATERIALIZED (
    SELECT e.id, e.user_id, e.trigger, e.created_at
      FROM engagement_state_transitions e, bounds b
     WHERE e.from_state = @goodbye_state::text
       AND e.created_at >= b.first_start AND e.created_at <= @as_of::timestamptz
), outcomes AS (
    -- each goodbye's first move out of goodbye_sent after it
    SELECT DISTINCT ON (g.id) g.id, e.trigger, e.created_at
      FROM goodbyes g
      JOIN exits e ON e.user_id = g.user_id AND e.id > g.id
     ORDER BY g.id, e.id
), answered AS (
    SELECT o.id
      FROM outcomes o
      JOIN clocks c ON c.id = o.id
     WHERE o.trigger = ANY (@answer_triggers::text[])
       AND o.created_at <= c.sent_at + @answer_window::interval
), returns AS MATERIALIZED (
    SELECT c.id, c.user_id, c.created_at
      FROM engagement_state_transitions c, bounds b
     WHERE c.trigger = @comeback_trigger::text
       AND c.created_at >= b.first_start AND c.created_at <= @as_of::timestamptz
), reactivated AS (
    SELECT DISTINCT g.id
      FROM goodbyes g
      JOIN returns c ON c.user_id = g.user_id AND c.id > g.id
                     AND c.created_at >= g.created_at AND c.created_at <= g.created_at + @window::interval
)
SELECT b.first_start + g.w * interval '7 days' AS week_start,
       g.timing,
       count(*)::bigint AS users,
       count(a.id)::bigint AS answered_48h,
       count(r.id)::bigint AS reactivated
  FROM goodbyes g
 CROSS JOIN bounds b
  LEFT JOIN answered a ON a.id = g.id
  LEFT JOIN reactivated r ON r.id = g.id
 GROUP BY g.w, b.first_start, g.timing
 ORDER BY g.w, g.timing
