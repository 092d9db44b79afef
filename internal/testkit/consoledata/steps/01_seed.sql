-- Every user's category, current state and the last move that put them
-- there (step 1 of their history, counted backwards), and how many moves of
-- their history the log gets (ell), so that the log holds exactly
-- @transitions rows.
--
-- User i (0 <= i < @users) has id md5('consoledata:' || i). Categories
-- (cat), with the state they leave the user in:
--   1  active, no logged move in the window (never silent 14 days)
--   2  active, came back by writing (user_message from goodbye_sent,
--      dormant, help_flow or remind_later)
--   3  active, goodbye undelivered at the last run (silent 15+ days; their
--      next goodbye is due the next UTC day)
--   4  goodbye_sent at one of the last three runs
--   5  help_flow (answered within the last 14 days)
--   6  remind_later (remind_at within the next 14 days)
--   7  dormant: goodbye_timeout          8  dormant: goodbye_answer_dormant
--   9  dormant: reminder_due             10 dormant since before the window
--   11 opted out, active                 12 opted out, dormant
-- Opted-out users (2%) have no history in the window: the daily job never
-- moves them, and they may be silent for weeks.
--
-- ell: every user the category gives a history (d >= 1) gets its last move;
-- the rest of @transitions is spread over the users in proportion to how
-- much more history their category wants (d - 1), by cumulative rounding,
-- so the total is exact. With fewer transitions than such users, the moves
-- themselves are spread that way and some users get none.
CREATE TEMP TABLE cd_seed AS
WITH g AS (
    SELECT i,
           pg_temp.cd_u(i, 1) AS uc, pg_temp.cd_u(i, 2) AS u1, pg_temp.cd_u(i, 3) AS u2,
           pg_temp.cd_u(i, 4) AS u3, pg_temp.cd_u(i, 6) AS ud, pg_temp.cd_u(i, 8) AS uf
      FROM generate_series(0, @users::bigint - 1) AS i
), c AS (
    SELECT g.*,
           CASE WHEN pg_temp.cd_u(i, 7) < 0.02 THEN CASE WHEN u3 < 0.75 THEN 11 ELSE 12 END
                WHEN uc < 0.2450 THEN 1
                WHEN uc < 0.2555 THEN 3
                WHEN uc < 0.7000 THEN 2
                WHEN uc < 0.7800 THEN 4
                WHEN uc < 0.8100 THEN 5
                WHEN uc < 0.8500 THEN 6
                WHEN uc < 0.9325 THEN 7
                WHEN uc < 0.9625 THEN 8
                WHEN uc < 0.9775 THEN 9
                ELSE 10 END AS cat
      FROM g
), cd AS (
    SELECT c.*,
           CASE WHEN cat = 2 THEN CASE WHEN ud < 0.15 THEN 1 WHEN ud < 0.50 THEN 2 WHEN ud < 0.75 THEN 3 WHEN ud < 0.90 THEN 4 ELSE 5 END
                WHEN cat = 3 THEN CASE WHEN ud < 0.5 THEN 2 ELSE 3 END
                WHEN cat = 4 THEN CASE WHEN ud < 0.30 THEN 1 WHEN ud < 0.60 THEN 2 WHEN ud < 0.85 THEN 3 ELSE 4 END
                WHEN cat IN (5, 6, 7, 8, 9) THEN CASE WHEN ud < 0.5 THEN 2 WHEN ud < 0.8 THEN 3 ELSE 4 END
                ELSE 0
           END AS d
      FROM c
), w AS (
    SELECT cd.*, least(d, 1) AS b, greatest(d - 1, 0) AS e,
           sum(least(d, 1)) OVER () AS bt, sum(greatest(d - 1, 0)) OVER () AS et,
           sum(least(d, 1)) OVER (ORDER BY i) AS bc, sum(greatest(d - 1, 0)) OVER (ORDER BY i) AS ec
      FROM cd
), l AS (
    SELECT w.*,
           (CASE WHEN @transitions::bigint >= bt
                 THEN b + CASE WHEN et > 0
                               THEN ((@transitions::bigint - bt) * ec) / et - ((@transitions::bigint - bt) * (ec - e)) / et
                               ELSE ((@transitions::bigint - bt) * (i + 1)) / @users::bigint
                                    - ((@transitions::bigint - bt) * i) / @users::bigint END
                 ELSE (@transitions::bigint * bc) / bt - (@transitions::bigint * (bc - b)) / bt
            END)::int AS ell
      FROM w
), r AS (
    -- run1: the run of a last move the daily job made (for 10 and 12 the
    -- goodbye_timeout long before the window). back: how far back a
    -- dormant user's last move may lie, less the longer the history the
    -- log holds of them, which must fit the window before it.
    SELECT l.*, bk.back,
           CASE WHEN cat = 3 THEN @r0::timestamptz
                WHEN cat = 4 THEN @r0::timestamptz - floor(u1 * 3) * interval '1 day'
                WHEN cat IN (7, 9) THEN @r0::timestamptz - floor(u1 * back) * interval '1 day'
                WHEN cat IN (10, 12) THEN pg_temp.cd_run(@window_start::timestamptz - (1 + u1 * 100) * interval '1 day')
                                          + interval '3 days'
           END AS run1
      FROM l
     CROSS JOIN LATERAL (SELECT greatest(3, 70 - 16 * (ell - 1)) AS back) bk
    OFFSET 0 -- here and below: each column computed once, not at every use
), a AS (
    SELECT r.*,
           CASE WHEN cat IN (1, 2) THEN
                     @as_of::timestamptz - CASE WHEN u2 < 0.55 THEN u1 * interval '3 days'
                                                WHEN u2 < 0.83 THEN interval '3 days' + u1 * interval '6 days'
                                                ELSE interval '9 days' + u1 * ((@as_of::timestamptz - @la_lo::timestamptz) - interval '9 days') END
                WHEN cat = 3 THEN pg_temp.cd_la(i, @r0::timestamptz - interval '1 day')
                WHEN cat = 4 THEN pg_temp.cd_la(i, run1)
                WHEN cat = 5 THEN @as_of::timestamptz - (interval '10 minutes'
                                  + u1 * ((@as_of::timestamptz - @la_lo::timestamptz) - interval '10 minutes'))
                WHEN cat = 6 THEN @as_of::timestamptz - (interval '10 minutes' + u1 * interval '13 days 23 hours 40 minutes')
                WHEN cat IN (7, 10, 12) THEN pg_temp.cd_la(i, run1 - interval '3 days')
                WHEN cat = 8 THEN @as_of::timestamptz - (interval '1 hour' + u1 * back * interval '1 day')
                WHEN cat = 9 THEN run1 - (1 + 1380 * u2) * interval '1 minute' - interval '14 days'
                ELSE @as_of::timestamptz - u1 * interval '60 days'
           END AS la
      FROM r
    OFFSET 0
), s AS (
    -- t1: when the last move happened. A user who came back by writing
    -- did so at any time of the window before their last activity that
    -- leaves room for the rest of their history (18 days a move).
    SELECT a.*,
           CASE WHEN cat IN (1, 2, 11)
                THEN la - pg_temp.cd_u(i, 9) * greatest(interval '0', (la - @window_start::timestamptz)
                                                                       - greatest(ell - 1, 0) * interval '18 days')
                WHEN cat = 3 THEN pg_temp.cd_started(@r0::timestamptz) + (40 + 14 * u3) * interval '1 second'
                WHEN cat = 4 THEN pg_temp.cd_started(run1) + (0.5 + 38 * u3) * interval '1 second'
                WHEN cat IN (5, 6, 8) THEN la
                WHEN cat = 9 THEN pg_temp.cd_started(run1) + (55 + 5 * u3) * interval '1 second'
                ELSE pg_temp.cd_started(run1) + (40 + 14 * u3) * interval '1 second'
           END AS t1,
           (CASE WHEN cat IN (1, 2, 11) THEN 5 WHEN cat = 3 THEN 3 WHEN cat = 4 THEN 1 WHEN cat = 5 THEN 6
                 WHEN cat = 6 THEN 7 WHEN cat = 8 THEN 8 WHEN cat = 9 THEN 4 ELSE 2 END)::smallint AS trig1,
           (CASE WHEN cat IN (1, 2, 11) THEN CASE WHEN uf < 0.40 THEN 2 WHEN uf < 0.80 THEN 5 WHEN uf < 0.92 THEN 3 ELSE 4 END
                 WHEN cat = 4 THEN CASE WHEN u2 < 0.88 THEN 1 ELSE 3 END
                 WHEN cat = 9 THEN 4
                 ELSE 2 END)::smallint AS from1
      FROM a
    OFFSET 0
)
-- gs0, ge0, remind0: the state row's goodbye and reminder timestamps as
-- the last move implies them; consoledata.users prefers what the logged
-- history says. The goodbye before an answer is found as cd_chain finds it
-- (same key and stream), so both agree wherever the log is cut.
SELECT i, cat, ell, la, t1, trig1, from1,
       (CASE WHEN cat IN (1, 2, 3, 11) THEN 1 WHEN cat = 4 THEN 2 WHEN cat = 5 THEN 3 WHEN cat = 6 THEN 4 ELSE 5 END)::smallint AS state,
       cat IN (11, 12) AS opt,
       CASE WHEN cat = 4 THEN la WHEN cat = 9 THEN la + interval '14 days' END AS aux1,
       CASE WHEN cat = 2 AND from1 = 2 OR cat IN (5, 6, 8)
            THEN pg_temp.cd_run(t1 - (interval '8 hours' + pg_temp.cd_u(i * 1024 + 2, 12) * interval '36 hours'))
            WHEN cat = 3 THEN @r0::timestamptz - interval '1 day'
            WHEN cat = 4 THEN run1
            WHEN cat IN (7, 10, 12) THEN run1 - interval '3 days'
            WHEN cat = 9 THEN pg_temp.cd_run(la - (interval '8 hours' + pg_temp.cd_u(i * 1024 + 3, 12) * interval '36 hours'))
       END AS gs0,
       CASE WHEN cat = 2 AND from1 = 2 OR cat IN (5, 6, 8) THEN t1
            WHEN cat = 3 THEN @r0::timestamptz
            WHEN cat = 4 THEN run1 + interval '48 hours'
            WHEN cat IN (7, 10, 12) THEN run1 - interval '1 day'
            WHEN cat = 9 THEN la
       END AS ge0,
       CASE WHEN cat = 6 THEN t1 + interval '14 days' WHEN cat = 9 THEN la + interval '14 days' END AS remind0,
       '55119' || lpad(((i * 48271 + 12345678) % 100000000)::text, 8, '0') || '@s.whatsapp.net' AS jid,
       -- zi: the user's zone, 1-based in @zones, for 12% of users; 0: none
       -- (queue-process's --timezone applies).
       CASE WHEN pg_temp.cd_u(i, 10) >= 0.88
            THEN 1 + floor(pg_temp.cd_u(i, 11) * cardinality(@zones::text[]))::int ELSE 0 END AS zi,
       CASE WHEN pg_temp.cd_u(i, 12) < 0.94 THEN 'pt-BR' ELSE 'en' END AS locale,
       @window_start::timestamptz - (7 + pg_temp.cd_u(i, 13) * 700) * interval '1 day' AS created_at,
       -- Transactions: none for 70% of users, then 1, 2 or 3, in the three
       -- weeks before their last activity and within the last 60 days.
       CASE WHEN ntx >= 1 AND la - pg_temp.cd_u(i, 15) * interval '21 days' >= @as_of::timestamptz - interval '60 days'
            THEN la - pg_temp.cd_u(i, 15) * interval '21 days' END AS tx1,
       CASE WHEN ntx >= 2 AND la - pg_temp.cd_u(i, 16) * interval '21 days' >= @as_of::timestamptz - interval '60 days'
            THEN la - pg_temp.cd_u(i, 16) * interval '21 days' END AS tx2,
       CASE WHEN ntx >= 3 AND la - pg_temp.cd_u(i, 17) * interval '21 days' >= @as_of::timestamptz - interval '60 days'
            THEN la - pg_temp.cd_u(i, 17) * interval '21 days' END AS tx3
  FROM s
 CROSS JOIN LATERAL (SELECT CASE WHEN pg_temp.cd_u(i, 14) < 0.70 THEN 0 WHEN pg_temp.cd_u(i, 14) < 0.85 THEN 1
                                 WHEN pg_temp.cd_u(i, 14) < 0.95 THEN 2 ELSE 3 END AS ntx) x
