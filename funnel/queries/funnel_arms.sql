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
-- The week's goodbyes are read set-based, from the log's (trigger,
-- created_at) index (migration 36); what became of each is then read
-- from its user's rows alone: the moves logged after it, in the log's
-- (user_id, id) index, and the user's messages, in the queue's (user_id,
-- created_at), a handful each. Their other conditions are the
-- aggregates' filters, not the scans': the statement costs what the
-- goodbyes are, whatever the planner guesses. (Joined set-based, the
-- steps were guessed at one row each right after a day's goodbyes were
-- logged, before autovacuum analyzed the log, and one was scanned whole
-- for every row of another: 900 goodbyes took 15 s. Looked up with the
-- conditions in the scans, each goodbye read every comeback of its
-- weeks, by the (trigger, created_at) index: 6,500 took 8 s.)
--
-- not null: week_start, variant
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
), outcomes AS (
    SELECT g.w, g.holdout, g.variant, g.timing,
           coalesce(m.back, false) AS reactivated,
           coalesce(g.timing IS NOT NULL
                    AND m.exit_trigger = ANY (@answer_triggers::text[])
                    AND m.exit_at <= coalesce(s.sent_at, g.created_at) + @answer_window::interval, false) AS answered
      FROM goodbyes g
     CROSS JOIN bounds b
     CROSS JOIN LATERAL (
           -- the user's moves after the goodbye: whether they wrote again
           -- within @window of it, and their first move out of
           -- @goodbye_state after it
           SELECT bool_or(e.trigger = @comeback_trigger::text AND e.created_at >= g.created_at
                          AND e.created_at <= least(g.created_at + @window::interval, @as_of::timestamptz)) AS back,
                  (array_agg(e.trigger ORDER BY e.id) FILTER (WHERE e.from_state = @goodbye_state::text
                       AND e.created_at >= b.first_start AND e.created_at <= @as_of::timestamptz))[1] AS exit_trigger,
                  (array_agg(e.created_at ORDER BY e.id) FILTER (WHERE e.from_state = @goodbye_state::text
                       AND e.created_at >= b.first_start AND e.created_at <= @as_of::timestamptz))[1] AS exit_at
             FROM engagement_state_transitions e
            WHERE e.user_id = g.user_id AND e.id > g.id
     ) m
     CROSS JOIN LATERAL (
           -- a timed goodbye's send: the message the same run queued
           SELECT min(q.sent_at) FILTER (WHERE q.job_run_id = g.job_run_id AND q.message_type = @goodbye_kind::text
                       AND q.period_start >= b.first_start - interval '1 day'
                       AND q.period_start <= @as_of::timestamptz) AS sent_at
             FROM engagement_message_queue q
            WHERE g.timing IS NOT NULL AND q.user_id = g.user_id
     ) s
)
SELECT b.first_start + o.w * interval '7 days' AS week_start,
       o.holdout,
       o.variant,
       o.timing,
       count(*)::bigint AS users,
       count(*) FILTER (WHERE o.answered)::bigint AS answered_48h,
       count(*) FILTER (WHERE o.reactivated)::bigint AS reactivated
  FROM outcomes o
 CROSS JOIN bounds b
 GROUP BY o.w, b.first_start, o.holdout, o.variant, o.timing
 ORDER BY o.w, o.holdout, o.variant, o.timing
