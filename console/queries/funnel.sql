-- The goodbye funnel by weekly cohort: every goodbye (an @goodbye_trigger
-- move) logged in the last @weeks ISO weeks (UTC) up to @as_of, by the
-- week it was logged in (half-open, [Monday 00:00, next Monday 00:00): a
-- goodbye at exactly Monday 00:00:00 is that Monday's week's), with
--   the outcome  the user's next move out of @goodbye_state, logged by
--                @as_of: an answer (help, remind later, not now), came
--                back on their own (@comeback_trigger), timed out, or
--                undelivered; none yet: still waiting;
--   reactivated  the user wrote again (@comeback_trigger, from any state)
--                within @window of the goodbye, by @as_of;
--   accepted     the cohort's goodbye messages (kind @goodbye_kind, by the
--                day they were queued for) that WhatsApp (or the bot)
--                accepted: sent, or failed after acceptance; or, once
--                cleanup has deleted them, at least the goodbyes answered
--                or timed out (both only follow a delivery);
--   delivered,   of those, the ones a receipt (engagement_receipt,
--   read         migration 49) says were delivered, and read;
--   failed_late  the ones WhatsApp failed after accepting them (status
--                failed with a sent_at: 131026, 131049, …);
--   receipts     how many of them any receipt reached: 0 means nobody
--                passes receipts on, and delivered and read say nothing.
-- Set-based: the goodbyes, the returns and the moves out of goodbye_sent
-- of the weeks come from the log's indexes alone (migrations 35, 36) and
-- meet the goodbyes by user in joins; nothing is looked up goodbye by
-- goodbye.
-- not null: week_start, window_closed
WITH bounds AS (
    SELECT date_trunc('week', @as_of::timestamptz, 'UTC') - (@weeks::int - 1) * interval '7 days' AS first_start
), goodbyes AS MATERIALIZED (
    SELECT g.id, g.user_id, g.created_at,
           floor(extract(epoch FROM g.created_at - b.first_start) / 604800)::int AS w
      FROM engagement_state_transitions g, bounds b
     WHERE g.trigger = @goodbye_trigger::text
       AND g.created_at >= b.first_start AND g.created_at <= @as_of::timestamptz
), returns AS MATERIALIZED (
    SELECT c.id, c.user_id, c.created_at
      FROM engagement_state_transitions c, bounds b
     WHERE c.trigger = @comeback_trigger::text
       AND c.created_at >= b.first_start AND c.created_at <= @as_of::timestamptz
), reactivated AS (
    SELECT g.w, count(DISTINCT g.id) AS n
      FROM goodbyes g
      JOIN returns c ON c.user_id = g.user_id AND c.id > g.id AND c.created_at <= g.created_at + @window::interval
     GROUP BY g.w
), exits AS MATERIALIZED (
    SELECT e.id, e.user_id, e.trigger
      FROM engagement_state_transitions e, bounds b
     WHERE e.from_state = @goodbye_state::text
       AND e.created_at >= b.first_start AND e.created_at <= @as_of::timestamptz
), firsts AS (
    -- each goodbye's outcome: the user's first move out of goodbye_sent after it
    SELECT DISTINCT ON (g.id) g.id, e.trigger
      FROM goodbyes g
      JOIN exits e ON e.user_id = g.user_id AND e.id > g.id
     ORDER BY g.id, e.id
), outcomes AS (
    SELECT g.w,
           count(*) AS goodbyes,
           count(*) FILTER (WHERE o.trigger = @answer_help::text) AS answered_help,
           count(*) FILTER (WHERE o.trigger = @answer_remind_later::text) AS answered_remind_later,
           count(*) FILTER (WHERE o.trigger = @answer_dormant::text) AS answered_not_now,
           count(*) FILTER (WHERE o.trigger = @comeback_trigger::text) AS came_back,
           count(*) FILTER (WHERE o.trigger = @timeout_trigger::text) AS timed_out,
           count(*) FILTER (WHERE o.trigger = @undelivered_trigger::text) AS undelivered,
           count(*) FILTER (WHERE o.trigger IS NULL) AS waiting
      FROM goodbyes g
      LEFT JOIN firsts o ON o.id = g.id
     GROUP BY g.w
), sent AS (
    SELECT floor(extract(epoch FROM q.period_start - b.first_start) / 604800)::int AS w,
           count(*) AS n,
           count(*) FILTER (WHERE q.status = 'sent' AND q.delivered_at IS NOT NULL) AS delivered,
           count(*) FILTER (WHERE q.status = 'sent' AND q.read_at IS NOT NULL) AS read,
           count(*) FILTER (WHERE q.status = 'failed') AS failed_late,
           count(*) FILTER (WHERE q.delivered_at IS NOT NULL OR q.status = 'failed') AS receipts
      FROM engagement_message_queue q, bounds b
     WHERE q.message_type = @goodbye_kind::text
       AND q.period_start >= b.first_start AND q.period_start <= @as_of::timestamptz
       AND (q.status = 'sent' OR (q.status = 'failed' AND q.sent_at IS NOT NULL))
     GROUP BY 1
)
SELECT b.first_start + w.i * interval '7 days' AS week_start,
       coalesce(o.goodbyes, 0) AS goodbyes,
       greatest(coalesce(s.n, 0), coalesce(o.answered_help + o.answered_remind_later + o.answered_not_now + o.timed_out, 0)) AS accepted,
       coalesce(s.delivered, 0) AS delivered, coalesce(s.read, 0) AS read, coalesce(s.failed_late, 0) AS failed_late,
       coalesce(s.receipts, 0) AS receipts,
       coalesce(o.answered_help, 0) AS answered_help, coalesce(o.answered_remind_later, 0) AS answered_remind_later,
       coalesce(o.answered_not_now, 0) AS answered_not_now, coalesce(o.came_back, 0) AS came_back,
       coalesce(o.timed_out, 0) AS timed_out, coalesce(o.undelivered, 0) AS undelivered, coalesce(o.waiting, 0) AS waiting,
       coalesce(r.n, 0) AS reactivated,
       b.first_start + (w.i + 1) * interval '7 days' + @window::interval <= @as_of::timestamptz AS window_closed
  FROM bounds b
 CROSS JOIN generate_series(0, @weeks::int - 1) AS w(i)
  LEFT JOIN outcomes o ON o.w = w.i
  LEFT JOIN reactivated r ON r.w = w.i
  LEFT JOIN sent s ON s.w = w.i
 ORDER BY w.i;
