-- The queue: one goodbye per inactivity_14d of the log, one reminder per
-- reminder_due since @reminders_since (the operator turned
-- engagement-daily --send-reminder on then; opted-out users get none), and
-- exactly @reviews weekly reviews, all as the jobs queue them: message
-- type, catalog key, idempotency key, period_start and replay_until from
-- statemachine's kinds table, scheduled_for the run's as-of, created_at the
-- run's write (a goodbye's is its log row's), the run's id. Seed computes
-- what is the same for every message of a run in Go, once: per daily run n
-- (1-based from @first_day) and per weekly run j (0-based back from @w0)
-- the key suffix, the period and the run's id, and per run and zone
-- (@nz zones, 0: the default) where quiet hours moved scheduled_for
-- (@d_sched, @w_sched).
--
-- Reviews: a user's candidate weeks are consoledata.users' mask (& emask
-- when @use_emask); @reviews is spread over the users in proportion to
-- their candidates by cumulative rounding, in user_id order (quota, from
-- the running counts all_cum and eng_cum), and each user gets a streak of
-- quota candidate weeks, starting at a week of their own (phase) and
-- wrapping around the window.
--
-- What became of each message, in order:
--   a goodbye the log answers with goodbye_undelivered failed (75%) or was
--     cancelled by an operator; every other goodbye was delivered, except
--     some of the last run's, which are still in the queue;
--   18% of the last week's reviews are still queued (half due and waiting,
--     half retried later after a transient error, a few in flight), 3.6% of
--     reviews were cancelled and 2.2% failed; reminders were delivered;
--   quiet hours (21:00-09:00 in the user's zone, São Paulo's when unset)
--     moved scheduled_for to 09:00 local at the claim; a message still
--     held there at @as_of is pending, one due whose send would come after
--     @as_of is pending (or, 2%, being sent: processing, claimed by one of
--     @holders until a few minutes after @as_of), a failure still being
--     retried at @as_of is pending with its error.
-- Delivered: sent_at a few seconds to minutes after scheduled_for (up to
-- 45 minutes for the Monday reviews), a provider message id, 3% after one
-- retry; WhatsApp's receipts for 92% of them (delivered_at seconds after
-- the send), 65% read (read_at a minute to an hour after it). Failed: one of six recurring errors of the webhook transport,
-- retry_count 3 for a transient one (retries exhausted), 0 for a permanent
-- one. Cancelled: the claim's reasons (stale, opted_out, no_user) or an
-- operator's.
--
-- The rows go in in user_id order (consoledata.users' physical order, read
-- by a plain scan of the users from @user_lo to @user_hi: Seed runs ranges
-- side by side), with ids that start with the user's first 8 hex digits:
-- the primary key, the idempotency-key index and the per-user index all
-- fill left to right, which is what keeps millions of rows within minutes.
INSERT INTO engagement_message_queue
       (id, user_id, message_type, message_key, message_params, destination, destination_jid, scheduled_for, sent_at,
        status, retry_count, error_message, idempotency_key, created_at, claimed_until, claimed_by,
        provider_message_id, job_run_id, cancel_reason, period_start, replay_until, delivered_at, read_at)
WITH q AS (
    SELECT u.i, u.user_id, u.uid, u.idp, u.jid, u.zi, u.opt, u.ell, u.ts, u.tr, u.remind_at, u.tx1, u.tx2, u.tx3,
           c.cand, ph.phase,
           CASE WHEN @cands::bigint > 0
                THEN (@reviews::bigint * c.cum) / @cands::bigint - (@reviews::bigint * (c.cum - c.cnt)) / @cands::bigint
                ELSE 0 END AS quota,
           ((c.cand >> ph.phase) | (c.cand << (@nw::int - ph.phase))) & ((1::bigint << @nw::int) - 1) AS rot
      FROM consoledata.users u
     CROSS JOIN LATERAL (SELECT CASE WHEN @use_emask::boolean THEN u.mask & u.emask ELSE u.mask END AS cand,
                                CASE WHEN @use_emask::boolean THEN u.eng_cum ELSE u.all_cum END AS cum) c0
     CROSS JOIN LATERAL (SELECT c0.cand, c0.cum, bit_count(c0.cand::bit(64)) AS cnt) c
     CROSS JOIN LATERAL (SELECT floor(pg_temp.cd_u(u.i, 22) * @nw::int)::int AS phase) ph
     WHERE u.user_id >= @user_lo::uuid AND (@user_hi::uuid IS NULL OR u.user_id < @user_hi::uuid)
), m AS (
    -- One row per message: kind 1 goodbye, 2 reminder, 3 review; slot its
    -- place among the user's (the log position, the week); n the run's
    -- index (daily from 1, weekly from 0).
    SELECT q.i, q.user_id, q.uid, q.idp, q.jid, q.zi, q.tx1, q.tx2, q.tx3, e.*
      FROM q
     CROSS JOIN LATERAL (
           SELECT CASE WHEN q.tr[k] = 1 THEN 1 ELSE 2 END AS kind, k AS slot,
                  (pg_temp.cd_day(q.ts[k]) - @first_daynum::bigint + 1)::int AS n,
                  q.ts[k] AS queued_at, q.tr[k + 1] AS next_trigger,
                  -- A reminder's remind_at: 14 days after the answer
                  -- logged before it; for the log's oldest row, what
                  -- cd_chain drew (or, for the user's last move, the state
                  -- row's).
                  CASE WHEN q.tr[k] = 1 THEN NULL
                       WHEN k > 1 THEN q.ts[k - 1] + interval '14 days'
                       WHEN k = q.ell THEN q.remind_at
                       ELSE pg_temp.cd_run(q.ts[k])
                            - (1 + 1380 * pg_temp.cd_u(q.i * 1024 + q.ell - k + 1, 16)) * interval '1 minute' END AS remind_at
             FROM generate_subscripts(q.tr, 1) AS k
            WHERE (q.tr[k] = 1
                   OR q.tr[k] = 4 AND NOT q.opt AND pg_temp.cd_run(q.ts[k]) >= @reminders_since::timestamptz)
              AND (NOT @cut::boolean OR (q.ts[k], q.user_id) >= (@cut_at::timestamptz, @cut_user::uuid))
           UNION ALL
           SELECT 3, j, j,
                  (@w_started::timestamptz[])[j + 1] + (0.5 + 50 * pg_temp.cd_u(q.i * 4096 + 768 + j, 31)) * interval '1 second',
                  NULL, NULL
             FROM generate_series(0, @nw::int - 1) AS j
            WHERE q.quota > 0 AND (q.cand >> j) & 1 = 1
              AND bit_count((q.rot & ((1::bigint << ((j - q.phase + @nw::int) % @nw::int)) - 1))::bit(64)) < q.quota
     ) e
)
SELECT (m.idp || lpad(to_hex(hashint8extended(o.x, 47)), 16, '0') || lpad(to_hex(hashint8extended(o.x, 48) & 4294967295), 8, '0'))::uuid,
       m.user_id,
       (ARRAY[@goodbye_type::text, @reminder_type::text, @review_type::text])[m.kind],
       (ARRAY[@goodbye_key::text, @reminder_key::text, @review_key::text])[m.kind],
       CASE WHEN m.kind = 3
            THEN (ARRAY['{"count": "0"}', '{"count": "1"}', '{"count": "2"}', '{"count": "3"}']::jsonb[])[
                     1 + coalesce((m.tx1 > o.run_as_of - interval '7 days' AND m.tx1 <= o.run_as_of)::int, 0)
                       + coalesce((m.tx2 > o.run_as_of - interval '7 days' AND m.tx2 <= o.run_as_of)::int, 0)
                       + coalesce((m.tx3 > o.run_as_of - interval '7 days' AND m.tx3 <= o.run_as_of)::int, 0)]
            ELSE '{}'::jsonb END,
       'individual',
       m.jid,
       CASE WHEN o.fate = 'retry' THEN @as_of::timestamptz + (1 + 1200 * o.ud) * interval '1 minute' ELSE o.sched END,
       CASE WHEN o.fate = 'sent' THEN o.send_at END,
       CASE WHEN o.fate IN ('hold', 'due', 'retry') THEN 'pending' ELSE o.fate END,
       CASE o.fate WHEN 'failed' THEN CASE WHEN o.err <= 4 THEN 3 ELSE 0 END
                   WHEN 'retry' THEN 1 + (o.ud < 0.4)::int
                   WHEN 'sent' THEN (o.ue < 0.03)::int
                   ELSE 0 END,
       CASE o.fate WHEN 'failed' THEN (@errors::text[])[o.err]
                   WHEN 'retry' THEN (@errors::text[])[1 + floor(o.ue * 4)::int] END,
       m.uid || CASE m.kind WHEN 1 THEN (@d_suffix::text[])[m.n]
                            WHEN 2 THEN @reminder_infix::text || floor(date_part('epoch', m.remind_at) * 1000)::bigint::text
                            ELSE (@w_suffix::text[])[m.n + 1] END,
       m.queued_at,
       CASE WHEN o.fate = 'processing' THEN @as_of::timestamptz + (60 + 180 * o.ue) * interval '1 second' END,
       CASE WHEN o.fate = 'processing' THEN (@holders::text[])[1 + (o.ue < 0.5)::int] END,
       CASE WHEN o.fate = 'sent' THEN '3EB0' || upper(lpad(to_hex(hashint8extended(o.x, 46)), 16, '0')) END,
       CASE WHEN m.kind = 3 THEN (@weekly_ids::bigint[])[m.n + 1] ELSE (@daily_ids::bigint[])[m.n] END,
       CASE WHEN o.fate = 'cancelled'
            THEN CASE WHEN m.kind = 1 THEN 'operator'
                      ELSE (ARRAY['stale', 'stale', 'stale', 'stale', 'opted_out', 'opted_out', 'operator', 'operator',
                                  'operator', 'no_user'])[1 + floor(o.ue * 10)::int] END END,
       CASE m.kind WHEN 1 THEN (@d_period::timestamptz[])[m.n] WHEN 2 THEN m.remind_at ELSE (@w_period::timestamptz[])[m.n + 1] END,
       CASE m.kind WHEN 1 THEN (@d_period::timestamptz[])[m.n] + interval '1 day' WHEN 2 THEN m.remind_at
                   ELSE (@w_period::timestamptz[])[m.n + 1] + interval '7 days' END,
       CASE WHEN o.fate = 'sent' AND (hashint8extended(o.x, 49) & 1023) < 942
            THEN least(o.send_at + (2 + (hashint8extended(o.x, 50) & 63)) * interval '1 second', @as_of::timestamptz) END,
       CASE WHEN o.fate = 'sent' AND (hashint8extended(o.x, 49) & 1023) < 666
            THEN least(o.send_at + (70 + (hashint8extended(o.x, 51) & 4095)) * interval '1 second', @as_of::timestamptz) END
  FROM m
 -- One subquery per message, kept one by OFFSET 0: pulled up, every use of
 -- a column (fate is read a dozen times) would evaluate its whole
 -- expression again, which made this step ten times slower.
 CROSS JOIN LATERAL (
       SELECT x, run_as_of, sched, send_at, ud, ue, err,
              CASE WHEN sched > @as_of::timestamptz THEN 'hold'
                   WHEN plan = 'sent' AND send_at > @as_of::timestamptz THEN CASE WHEN ub < 0.02 THEN 'processing' ELSE 'due' END
                   WHEN plan = 'failed' AND sched + interval '40 minutes' > @as_of::timestamptz THEN 'retry'
                   ELSE plan END AS fate
         FROM (SELECT x, run_as_of, sched, ub, ud, ue, err,
                      greatest(sched, m.queued_at)
                      + (2 + pg_temp.cd_u(x, 42) * CASE WHEN m.kind = 3 THEN 2700 ELSE 1500 END) * interval '1 second' AS send_at,
                      CASE WHEN m.kind = 1 AND m.next_trigger = 3 THEN CASE WHEN ua < 0.75 THEN 'failed' ELSE 'cancelled' END
                           WHEN m.kind = 1 AND m.next_trigger IS NULL AND m.n = @nd::int AND ua < 0.15
                           THEN CASE WHEN ub < 0.05 THEN 'processing' ELSE 'due' END
                           WHEN m.kind IN (1, 2) THEN 'sent'
                           WHEN m.slot = 0 AND ua < 0.18
                           THEN CASE WHEN ub < 0.004 THEN 'processing' WHEN ub < 0.502 THEN 'due' ELSE 'retry' END
                           WHEN ua < 0.036 THEN 'cancelled'
                           WHEN ua < 0.058 THEN 'failed'
                           ELSE 'sent' END AS plan
                 FROM (SELECT x,
                              CASE WHEN m.kind = 3 THEN (@w_asof::timestamptz[])[m.n + 1] ELSE (@d_asof::timestamptz[])[m.n] END AS run_as_of,
                              CASE WHEN m.kind = 3 THEN (@w_sched::timestamptz[])[m.n * @nz::int + m.zi + 1]
                                   ELSE (@d_sched::timestamptz[])[(m.n - 1) * @nz::int + m.zi + 1] END AS sched,
                              pg_temp.cd_u(x, 40) AS ua, pg_temp.cd_u(x, 41) AS ub, pg_temp.cd_u(x, 43) AS ud,
                              pg_temp.cd_u(x, 44) AS ue, 1 + floor(pg_temp.cd_u(x, 45) * 6)::int AS err
                         FROM (SELECT m.i * 4096 + m.kind * 256 + m.slot AS x) x0) d) p
       OFFSET 0) o
