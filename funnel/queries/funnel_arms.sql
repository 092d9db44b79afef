-- The goodbye's arms by weekly cohort (issue 45): every goodbye (an
-- @goodbye_trigger move) logged in the last @weeks ISO weeks (UTC) up to
-- @as_of, by the week it was logged in (the weeks of console's
-- funnel.sql; half-open, [Monday 00:00, next Monday 00:00): a goodbye at
-- exactly Monday 00:00:00 is that Monday's week's, issue 56), split by what its log row recorded: holdout (migration 55;
-- the daily job held the user out: no message) or treatment (a goodbye was
-- queued; every goodbye before the holdout existed is one). A user counts
-- once per cohort, by their first goodbye of the week: a goodbye that
-- failed and was sent again the next day does not count a treated user
-- twice, while a held-out user never has a second.
--
--   users        the cohort's users in the arm;
--   reactivated  of them, those who wrote again (@comeback_trigger, from
--                any state) after that goodbye (logged after it, and no
--                earlier in time) and within @window of it, by @as_of.
--
-- The treated goodbyes' timing arm (issue 61, migration 84: 'best_hour' or
-- 'run_time', by user id, as engagement-daily --best-hour-percent recorded
-- it on the log row, intent to treat: a best-hour user whose hour was not
-- known yet stays in the best-hour arm; NULL for a run without the flag,
-- and always for the held-out arm, which gets no message and so no time),
-- with, for the timed goodbyes,
--
--   answered_48h  those who answered the goodbye (@answer_triggers: the
--                 user's first move out of @goodbye_state after it is an
--                 answer) within @answer_window of its send: the goodbye
--                 message's sent_at (the message the same run queued for
--                 the user, kind @goodbye_kind), or the log row's time
--                 when no such message is left (cleaned up, never sent).
--                 From the send, not the run: a best-hour goodbye leaves
--                 up to a day after the run, and counting from the run
--                 would give its user less time to answer. 0 untimed.
--
-- One row per cohort week with goodbyes, arm, copy variant (the
-- variant's name the daily job recorded on the log row, migration 57; ''
-- for the kind's one text, and always for the held-out arm) and timing.
-- Set-based: the goodbyes and the returns of the weeks come from the log's
-- (trigger, created_at) index (migration 36), the moves out of
-- @goodbye_state and the sends only for the timed goodbyes' users (none
-- without a timing), and they meet by user in joins; nothing is looked up
-- goodbye by goodbye.
--
-- not null: week_start, holdout, variant
WITH bounds AS (
    SELECT date_trunc('week', @as_of::timestamptz, 'UTC') - (@weeks::int - 1) * interval '7 days' AS first_start
), goodbyes AS MATERIALIZED (
    SELECT DISTINCT ON (w.w, g.user_id) g.id, g.user_id, g.created_at, g.holdout, coalesce(g.variant, '') AS variant,
           CASE WHEN NOT g.holdout THEN g.timing END AS timing, g.job_run_id, w.w
      FROM engagement_state_transitions g
     CROSS JOIN bounds b
     CROSS JOIN LATERAL (
           SELECT floor(extract(epoch FROM g.created_at - b.first_start) / 604800)::int AS w
     ) w
     WHERE g.trigger = @goodbye_trigger::text
       AND g.created_at >= b.first_start AND g.created_at <= @as_of::timestamptz
     ORDER BY w.w, g.user_id, g.id
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
), timed AS MATERIALIZED (
    SELECT g.id, g.user_id, g.created_at, g.job_run_id FROM goodbyes g WHERE g.timing IS NOT NULL
), sends AS (
    SELECT q.user_id, q.job_run_id, min(q.sent_at) AS sent_at
      FROM engagement_message_queue q
      JOIN (SELECT DISTINCT user_id FROM timed) t ON t.user_id = q.user_id
     CROSS JOIN bounds b
     WHERE q.message_type = @goodbye_kind::text
       AND q.period_start >= b.first_start - interval '1 day' AND q.period_start <= @as_of::timestamptz
       AND q.sent_at IS NOT NULL AND q.job_run_id IS NOT NULL
     GROUP BY q.user_id, q.job_run_id
), exits AS MATERIALIZED (
    SELECT e.id, e.user_id, e.trigger, e.created_at
      FROM engagement_state_transitions e
      JOIN (SELECT DISTINCT user_id FROM timed) t ON t.user_id = e.user_id
     CROSS JOIN bounds b
     WHERE e.from_state = @goodbye_state::text
       AND e.created_at >= b.first_start AND e.created_at <= @as_of::timestamptz
), outcomes AS (
    -- each timed goodbye's first move out of goodbye_sent after it
    SELECT DISTINCT ON (t.id) t.id, e.trigger, e.created_at
      FROM timed t
      JOIN exits e ON e.user_id = t.user_id AND e.id > t.id
     ORDER BY t.id, e.id
), answered AS (
    SELECT o.id
      FROM outcomes o
      JOIN timed t ON t.id = o.id
      LEFT JOIN sends s ON s.user_id = t.user_id AND s.job_run_id = t.job_run_id
     WHERE o.trigger = ANY (@answer_triggers::text[])
       AND o.created_at <= coalesce(s.sent_at, t.created_at) + @answer_window::interval
)
SELECT b.first_start + g.w * interval '7 days' AS week_start,
       g.holdout,
       g.variant,
       g.timing,
       count(*)::bigint AS users,
       count(a.id)::bigint AS answered_48h,
       count(r.id)::bigint AS reactivated
  FROM goodbyes g
 CROSS JOIN bounds b
  LEFT JOIN reactivated r ON r.id = g.id
  LEFT JOIN answered a ON a.id = g.id
 GROUP BY g.w, b.first_start, g.holdout, g.variant, g.timing
 ORDER BY g.w, g.holdout, g.variant, g.timing
