-- One row per user, in user_id order (the order the tables' primary keys
-- and the queue's key index fill best in): cd_seed joined with the user's
-- logged history (cd_chain), the state row's timestamps, and mask, the ISO
-- weeks of the window (bit j: the weekly run @w0 - j weeks) at whose run
-- the user was active or in help_flow and not opted out: those the weekly
-- review could have reached. emask marks the weeks the user was active in
-- (the review needs a transaction or bot activity in its 7 days): each
-- user is active a week with their own probability, 4/16 to 16/16, drawn
-- from 4-bit slices of one hash; Seed takes the reviews from mask & emask,
-- or from mask when that is too few for the sizes asked.
--
-- goodbye_sent_at is the run of the last inactivity_14d of the history
-- (the job sets it to the run's as-of) and goodbye_expires_at what came
-- next made it: as-of + 48 h (nothing yet, or goodbye_timeout), the as-of
-- of goodbye_undelivered, or the instant the user answered or wrote (the
-- bot sets least(expires, at)). remind_at is 14 days after the last
-- goodbye_answer_remind_later. Without such a move in the history, cd_seed's
-- values (from the category).
--
-- uid and idp (the id as text, its first 8 hex digits) are what the
-- queue's keys and ids are built from; all_cum and eng_cum count, in
-- user_id order, the candidate weeks of mask and of mask & emask up to and
-- including the user's, for the queue step's cumulative rounding.
--
-- An unlogged table of Seed's own schema, consoledata, rather than a
-- temporary one: the last steps run on two connections side by side and
-- both read it. Seed drops the schema when it is done.
CREATE UNLOGGED TABLE consoledata.users AS
SELECT u.*, u.user_id::text AS uid, left(u.user_id::text, 8) AS idp,
       (sum(bit_count(u.mask::bit(64))) OVER (ORDER BY u.user_id))::bigint AS all_cum,
       (sum(bit_count((u.mask & u.emask)::bit(64))) OVER (ORDER BY u.user_id))::bigint AS eng_cum
  FROM (
    SELECT s.i, md5('consoledata:' || s.i)::uuid AS user_id, s.cat, s.state, s.opt, s.ell, s.la, s.t1,
           c.ts, c.tr, c.fr, s.jid, s.zi, (@zones::text[])[s.zi] AS tz, s.locale, s.created_at, s.tx1, s.tx2, s.tx3,
           coalesce(pg_temp.cd_run(c.ts[q.m]), s.gs0) AS gs_at,
           coalesce(CASE WHEN q.m IS NULL THEN NULL
                         WHEN c.tr[q.m + 1] IS NULL OR c.tr[q.m + 1] = 2 THEN pg_temp.cd_run(c.ts[q.m]) + interval '48 hours'
                         WHEN c.tr[q.m + 1] = 3 THEN pg_temp.cd_run(c.ts[q.m + 1])
                         ELSE c.ts[q.m + 1] END, s.ge0) AS ge_at,
           coalesce(c.ts[q.m7] + interval '14 days', s.remind0) AS remind_at,
           greatest(s.la, s.t1) AS updated_at,
           CASE WHEN s.opt THEN 0::bigint ELSE (
               SELECT coalesce(bit_or(CASE WHEN iv.st IN (1, 3) AND iv.jhi >= iv.jlo
                                           THEN (1::bigint << (iv.jhi + 1)) - (1::bigint << iv.jlo) ELSE 0 END), 0)
                 FROM (SELECT CASE WHEN k = 0 THEN coalesce(c.fr[1], s.state) WHEN k < s.ell THEN c.fr[k + 1] ELSE s.state END AS st,
                              CASE WHEN k = 0 THEN @nw::int - 1
                                   ELSE least(@nw::int - 1, floor(date_part('epoch', @w0::timestamptz - c.ts[k]) / 604800)::int) END AS jhi,
                              CASE WHEN k = s.ell THEN 0
                                   ELSE greatest(0, floor(date_part('epoch', @w0::timestamptz - c.ts[k + 1]) / 604800)::int + 1) END AS jlo
                         FROM generate_series(0, s.ell) AS k) iv) END AS mask,
           (CASE WHEN ((e.h >>  0) & 15) < e.lv THEN    1 ELSE 0 END + CASE WHEN ((e.h >>  4) & 15) < e.lv THEN    2 ELSE 0 END +
            CASE WHEN ((e.h >>  8) & 15) < e.lv THEN    4 ELSE 0 END + CASE WHEN ((e.h >> 12) & 15) < e.lv THEN    8 ELSE 0 END +
            CASE WHEN ((e.h >> 16) & 15) < e.lv THEN   16 ELSE 0 END + CASE WHEN ((e.h >> 20) & 15) < e.lv THEN   32 ELSE 0 END +
            CASE WHEN ((e.h >> 24) & 15) < e.lv THEN   64 ELSE 0 END + CASE WHEN ((e.h >> 28) & 15) < e.lv THEN  128 ELSE 0 END +
            CASE WHEN ((e.h >> 32) & 15) < e.lv THEN  256 ELSE 0 END + CASE WHEN ((e.h >> 36) & 15) < e.lv THEN  512 ELSE 0 END +
            CASE WHEN ((e.h >> 40) & 15) < e.lv THEN 1024 ELSE 0 END + CASE WHEN ((e.h >> 44) & 15) < e.lv THEN 2048 ELSE 0 END +
            CASE WHEN ((e.h >> 48) & 15) < e.lv THEN 4096 ELSE 0 END + CASE WHEN ((e.h >> 52) & 15) < e.lv THEN 8192 ELSE 0 END
           )::bigint AS emask
      FROM cd_seed s
      LEFT JOIN cd_chain c ON c.i = s.i
     CROSS JOIN LATERAL (SELECT array_positions(c.tr, 1::smallint) AS p1, array_positions(c.tr, 7::smallint) AS p7) p
     CROSS JOIN LATERAL (SELECT p.p1[cardinality(p.p1)] AS m, p.p7[cardinality(p.p7)] AS m7) q
     CROSS JOIN LATERAL (SELECT hashint8extended(s.i, 21) AS h, 4 + floor(pg_temp.cd_u(s.i, 20) * 13)::int AS lv) e
    OFFSET 0) u
 ORDER BY u.user_id
