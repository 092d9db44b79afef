-- Each user's logged history: their last ell moves, built backwards from
-- the last one (cd_seed's step 1) by asking, at each step, which move of
-- the state machine's table could have led into the state the step left
-- from, and when. One row per user with a history, its moves oldest first
-- in three arrays: ts (created_at), tr (trigger) and fr (from-state);
-- move k's to-state is fr[k + 1], the last one's the user's state.
--
-- Codes: states 1 active, 2 goodbye_sent, 3 help_flow, 4 remind_later,
-- 5 dormant; triggers 1 inactivity_14d, 2 goodbye_timeout,
-- 3 goodbye_undelivered, 4 reminder_due, 5 user_message,
-- 6 goodbye_answer_help, 7 goodbye_answer_remind_later,
-- 8 goodbye_answer_dormant.
--
-- What leads into each state, and when (S is the later move, P the one
-- found):
--   goodbye_sent <- inactivity_14d (from active, or help_flow) at the run
--       S implies: 3 days before a goodbye_timeout, 1 day before a
--       goodbye_undelivered, 8 to 44 hours before an answer (the goodbye
--       is delivered at 09:00 local, quiet hours, some hours after the
--       06:00 UTC run);
--   active <- user_message (the user wrote: from goodbye_sent, dormant,
--       help_flow or remind_later) before S's silence began, or, 10% of
--       the time and never in the last three moves, goodbye_undelivered
--       the day before S (the goodbye failed; the next one goes out the
--       next day);
--   help_flow <- goodbye_answer_help 14 days before S's inactivity (a
--       help_flow user falls silent too), or up to 13 days before they wrote;
--   remind_later <- goodbye_answer_remind_later 14 days before remind_at
--       (reminder_due) or up to 13.5 days before they wrote;
--   dormant <- goodbye_timeout (65%), goodbye_answer_dormant (22%) or
--       reminder_due (13%), 1 to 20 days (plus slack) before they wrote.
-- Slack spreads a history over the window: each step may use a random part
-- of the time left before @window_start beyond 20 days (the longest wait
-- above) for each step still to come; and where less than 25 days a step
-- are left, the random parts of the waits above shrink in proportion (cf),
-- so that a history fits the window where it can. Runs are at 06:00 UTC; a run's moves are logged inside it, in
-- its step order (inactivity_14d, goodbye_timeout, reminder_due), as the
-- job logs them (cd_started).
--
-- A recursive CTE: each pass adds one move to every user still short of
-- ell, so the passes number the longest history, not the users. OFFSET 0
-- keeps each lateral subquery's columns computed once (and the helpers
-- given columns, which lets the planner inline them), not at every use.
CREATE TEMP TABLE cd_chain AS
WITH RECURSIVE c (i, k, ell, s_from, s_trig, s_at, s_aux, ts, tr, fr) AS (
    SELECT i, 1, ell, from1, trig1, t1, aux1, ARRAY[t1], ARRAY[trig1], ARRAY[from1]
      FROM cd_seed
     WHERE ell > 0
    UNION ALL
    SELECT c.i, c.k + 1, c.ell, f.p_from, p.p_trig, t.p_at, t.p_aux,
           t.p_at || c.ts, p.p_trig || c.tr, f.p_from || c.fr
      FROM c
     CROSS JOIN LATERAL (SELECT c.i * 1024 + c.k + 1 AS x, c.ell - c.k - 1 AS rem) n
     CROSS JOIN LATERAL (SELECT pg_temp.cd_u(n.x, 11) AS uc, pg_temp.cd_u(n.x, 12) AS ut, pg_temp.cd_u(n.x, 13) AS us,
                                pg_temp.cd_u(n.x, 14) AS uo, pg_temp.cd_u(n.x, 15) AS uf, pg_temp.cd_u(n.x, 16) AS ur
                         OFFSET 0) d
     CROSS JOIN LATERAL (
           SELECT (CASE c.s_from WHEN 2 THEN 1
                                 WHEN 1 THEN CASE WHEN c.k + 1 >= 4 AND d.uc < 0.10 THEN 3 ELSE 5 END
                                 WHEN 3 THEN 6
                                 WHEN 4 THEN 7
                                 ELSE CASE WHEN d.uc < 0.65 THEN 2 WHEN d.uc < 0.87 THEN 8 ELSE 4 END
                   END)::smallint AS p_trig
           OFFSET 0) p
     CROSS JOIN LATERAL (
           SELECT (CASE WHEN p.p_trig = 1 THEN CASE WHEN d.uf < 0.88 THEN 1 ELSE 3 END
                        WHEN p.p_trig = 5 THEN CASE WHEN d.uf < 0.35 THEN 2 WHEN d.uf < 0.80 THEN 5 WHEN d.uf < 0.92 THEN 3 ELSE 4 END
                        WHEN p.p_trig = 4 THEN 4
                        ELSE 2
                   END)::smallint AS p_from,
                  d.us * greatest(interval '0', (c.s_at - @window_start::timestamptz) - (n.rem + 1) * interval '20 days')
                       / (n.rem + 1) AS slack,
                  least(1, greatest(0, date_part('epoch', c.s_at - @window_start::timestamptz)) / ((n.rem + 1) * 2160000)) AS cf
           OFFSET 0) f
     CROSS JOIN LATERAL (
           SELECT CASE WHEN p.p_trig = 1 THEN
                            CASE c.s_trig WHEN 2 THEN pg_temp.cd_run(c.s_at) - interval '3 days'
                                          WHEN 3 THEN pg_temp.cd_run(c.s_at) - interval '1 day'
                                          ELSE pg_temp.cd_run(c.s_at - (interval '8 hours' + d.ut * interval '36 hours')) END
                       WHEN p.p_trig = 3 THEN pg_temp.cd_run(c.s_at) - interval '1 day'
                       WHEN p.p_trig IN (2, 4) THEN pg_temp.cd_run(c.s_at - (interval '1 day' + d.ut * f.cf * interval '19 days') - f.slack)
                  END AS p_run
           OFFSET 0) ru
     CROSS JOIN LATERAL (
           SELECT CASE p.p_trig
                       WHEN 1 THEN pg_temp.cd_started(ru.p_run) + (0.5 + 38 * d.uo) * interval '1 second'
                       WHEN 2 THEN pg_temp.cd_started(ru.p_run) + (40 + 14 * d.uo) * interval '1 second'
                       WHEN 3 THEN pg_temp.cd_started(ru.p_run) + (40 + 14 * d.uo) * interval '1 second'
                       WHEN 4 THEN pg_temp.cd_started(ru.p_run) + (55 + 5 * d.uo) * interval '1 second'
                       WHEN 5 THEN c.s_aux - f.slack
                       WHEN 6 THEN CASE WHEN c.s_trig = 1 THEN c.s_aux
                                        ELSE c.s_at - (interval '10 minutes' + d.ut * f.cf * interval '12 days 23 hours 50 minutes') END
                       WHEN 7 THEN CASE WHEN c.s_trig = 4 THEN c.s_aux - interval '14 days'
                                        ELSE c.s_at - (interval '10 minutes' + d.ut * f.cf * interval '13 days 11 hours 50 minutes') END
                       ELSE c.s_at - (interval '1 day' + d.ut * f.cf * interval '19 days') - f.slack
                  END AS p_at,
                  -- The next step back needs: before an inactivity_14d, the
                  -- user's last activity; before a reminder_due, remind_at.
                  CASE p.p_trig WHEN 1 THEN pg_temp.cd_la(c.i, ru.p_run)
                                WHEN 4 THEN ru.p_run - (1 + 1380 * d.ur) * interval '1 minute' END AS p_aux) t
     WHERE c.k < c.ell
)
SELECT i, ts, tr, fr FROM c WHERE k = ell
