-- Claim up to @batch due pending messages, oldest first (or in the order
-- of @kind_priority, see below), for @holder until
-- now() + @claim_timeout. FOR UPDATE SKIP LOCKED lets any number of
-- processes claim side by side, each message going to exactly one of them.
-- "Now" is the processor's clock: the database's, @clock_offset ahead (0
-- but in a simulation: queue-process --as-of).
--
-- Each due message is first checked against its user as they are now, by
-- the rule of every door (engagement_refusal, migration 69: whoever queued
-- it) and the rule of its kind in @kinds (statemachine's kinds table, as
-- JSON: {"goodbye": {"send_while": ["goodbye_sent"], "current_goodbye_only":
-- true, "category": "marketing", "holdout": true}, …}; a type without a
-- kind has the rule of every door alone, with the category the operator
-- declared for it in engagement_message_types, else marketing):
--   a kind's user without a profile or state row   → cancelled, 'no_user'
--   an erased user (engagement_erasures) not opted
--     back in                                      → cancelled, 'erased'
--   a marketing message to an opted-out user       → cancelled, 'opted_out'
--   a goodbye (the kind with "holdout") to a user
--     held out of the current cycle                → cancelled, 'holdout'
-- and then, for a kind:
--   opted out of re-engagement              → cancelled, 'opted_out'
--     (but for a kind with confirms_opt_out, the opt-out's confirmation,
--     which is sent only while its user is still opted out: → 'stale'
--     once they opted back in)
--   a user no longer in one of the kind's send_while states
--     (a goodbye's user who answered or came back; a weekly review's
--     user sent a goodbye since)                                → 'stale'
--   with current_goodbye_only, a message whose period_start is another
--     UTC day than the user's goodbye_sent_at (one queued without a
--     period_start is checked on the state alone)               → 'stale'
-- On a transport held to the reach-out window (@reachout_window set: the
-- webhook to an unofficial client such as Baileys; NULL otherwise), a
-- message still wanted by the rules above whose user's last message to the
-- bot (user_engagement_states.last_activity_at; none known without a state
-- row) is older than @reachout_window                    → 'reachout_window'
-- (WhatsApp refuses it, error 463: docs/baileys.md). Any type, whoever
-- queued it; a last message only moves forward, so waiting never helps.
-- A message in doubt that an operator cancelled (engagementctl cancel, the
-- console: ops_cancel.sql leaves it pending with cancel_reason 'operator')
-- is no longer wanted                                        → 'operator'
-- A message still wanted but due inside the quiet hours (@quiet_start to
-- @quiet_end, NULL when off, may wrap midnight) in the user's time zone
-- (user_profiles.timezone as PostgreSQL reads it, engagement_zone(), else
-- @timezone) stays pending, moved to the end of the quiet hours
-- (engagement_quiet_until), deferred_reason 'quiet_hours'; an opt-out's
-- confirmation answers the user's own message and is not held.
--
-- The per-user cap (queue-process --per-user-cap; @per_user_cap NULL when
-- off): a message of a capped kind (@kinds' "capped": the marketing kinds)
-- whose user already has @per_user_cap messages of capped kinds sent or in
-- flight in the last @cap_window (or that many ahead of it in this batch)
-- waits, deferred_reason 'frequency', until the oldest of them leaves the
-- window (out of the quiet hours); one that would then be past its
-- replay_until (the end of its period: a weekly review of a week over) is
-- cancelled, 'frequency'.
--
-- Meta's verdict (the Cloud API; queue-process reads it at start): while
-- @quality_hold (the number's quality rating is RED or it is FLAGGED), a
-- message of a marketing kind waits, deferred_reason 'quality'; a message
-- whose key's template Meta paused or disabled (@paused_keys) waits,
-- 'template_paused'; both for @verdict_recheck, then the claim looks again
-- (utility kinds and other templates go meanwhile).
--
-- Under a send budget with ample room (@spend_limit: the budget's limit;
-- NULL otherwise), the claim spends a slot of @transport's budget per
-- recipient it claimed (distinct destination_jid; a message in doubt spends
-- none: the claim that sent it kept its slot, recover.sql), as one row of
-- engagement_send_budget_claims (with the messages and their recipients,
-- for a recovery to give back the slots of a dead holder), counted onto the budget's used if they
-- fit under @spend_limit. If not (other claims took the room), the whole
-- statement fails with SQLSTATE EB001 (engagement_send_budget_full),
-- nothing claimed, and the processor claims again under the budget's lock
-- (budget_apply.sql). The row of engagement_send_budgets is updated last,
-- so claims meet only from then to their commit; the processor sends this
-- claim under a short lock_timeout (claimWaitSQL), so that it never waits
-- on the row long while holding messages a hand-back may want.
--
-- Under --daily-limit auto (@window_margin set: Meta's messaging limit),
-- a message whose user's customer service window is open (their last
-- message, user_engagement_states.last_activity_at, less than 24 hours
-- ago: engagement_service_window_open) now and still @window_margin later
-- spends no slot: Meta counts only the users a business reaches outside a
-- window (https://developers.facebook.com/documentation/business-messaging/whatsapp/messaging-limits).
-- Its row carries no spend_id, so handing it back gives nothing back,
-- and says window_open, so that near the limit budget_apply.sql is not
-- asked to make room for it.
--
-- Each row says whether the message waited on the send budget
-- (deferred_reason 'budget' before this claim cleared it): near the limit,
-- budget_apply.sql keeps such a message's place at the head of the line.
--
-- The order (queue-process --kind-priority): with @kind_priority empty,
-- the oldest due first (plain: the pending index in scheduled_for order).
-- With a list of message types, the listed types first, in its order, then
-- every other type, oldest due first within each; a message that waited
-- on the budget goes before one of its type that did not (it heads the
-- line). No type starves: a message queued more than @priority_max_wait
-- ago (created_at, which no deferral moves) goes first, whatever its type.
-- The types pending are found by a loose scan of the pending type index
-- (types), each type's oldest due taken by its own index probe (ranked),
-- so a claim reads what its batch holds, never the whole backlog. Rows a
-- type's probe locked but the batch did not take are free again at the
-- statement's end. The claim's rows come back in that order (pos), the
-- order budget_apply.sql gives out the last slots in.
--
-- Nullable columns come back coalesced and the params as raw JSON text, so
-- no row can make the claim itself fail: a row that cannot be delivered
-- fails alone, when its turn comes.
--
-- nullable: @quiet_start, @quiet_end, @per_user_cap, @spend_limit, @window_margin, @reachout_window
-- not null: verdict, id, idempotency_key, waited, window_open
WITH RECURSIVE plain AS (
    SELECT q.id, row_number() OVER (ORDER BY q.scheduled_for, q.id) AS pos
      FROM (SELECT q.id, q.scheduled_for
              FROM engagement_message_queue q
             WHERE q.status = 'pending' AND q.scheduled_for <= now() + @clock_offset::interval
               AND cardinality(@kind_priority::text[]) = 0
             ORDER BY q.scheduled_for
             LIMIT @batch
               FOR UPDATE OF q SKIP LOCKED) q
), types AS (
    SELECT (SELECT min(q.message_type) FROM engagement_message_queue q
             WHERE q.status = 'pending' AND cardinality(@kind_priority::text[]) > 0) AS type
    UNION ALL
    SELECT (SELECT min(q.message_type) FROM engagement_message_queue q
             WHERE q.status = 'pending' AND q.message_type > t.type)
      FROM types t
     WHERE t.type IS NOT NULL
), ranked AS (
    SELECT c.id,
           row_number() OVER (ORDER BY CASE WHEN c.created_at <= now() + @clock_offset::interval - @priority_max_wait::interval
                                            THEN 0
                                            ELSE coalesce(array_position(@kind_priority::text[], t.type),
                                                          cardinality(@kind_priority::text[]) + 1) END,
                                       c.deferred_reason IS DISTINCT FROM 'budget', c.scheduled_for, c.id) AS pos
      FROM types t
      CROSS JOIN LATERAL (SELECT q.id, q.scheduled_for, q.created_at, q.deferred_reason
                            FROM engagement_message_queue q
                           WHERE q.status = 'pending' AND q.message_type = t.type
                             AND q.scheduled_for <= now() + @clock_offset::interval
                           ORDER BY q.scheduled_for
                           LIMIT @batch
                             FOR UPDATE OF q SKIP LOCKED) c
     WHERE t.type IS NOT NULL
), picked AS (
    SELECT id, pos FROM plain
    UNION ALL
    SELECT id, pos FROM ranked WHERE pos <= @batch
), due AS (
    SELECT q.id, k.kind, q.period_start, p.locale,
           q.user_id, q.replay_until, q.message_key,
           q.deferred_reason IS NOT DISTINCT FROM 'budget' AS waited,
           coalesce(q.in_doubt, false) AS in_doubt,
           q.cancel_reason IS NOT DISTINCT FROM 'operator' AS operator_cancelled,
           p.user_id IS NULL OR s.user_id IS NULL AS no_user,
           p.reengagement_opt_out, k.confirms_opt_out, s.state,
           engagement_refusal(coalesce(k.kind ->> 'category',
                                       (SELECT t.category FROM engagement_message_types t WHERE t.message_type = q.message_type)),
                              e.user_id IS NOT NULL AND coalesce(p.reengagement_opt_out, true),
                              coalesce(p.reengagement_opt_out, false),
                              coalesce((k.kind ->> 'holdout')::boolean AND s.goodbye_holdout
                                       AND coalesce(s.last_activity_at, s.created_at) <= s.goodbye_sent_at, false)) AS refusal,
           @reachout_window::interval IS NOT NULL
           AND coalesce(s.last_activity_at < now() + @clock_offset::interval - @reachout_window::interval, true)
               AS outside_reach,
           date_trunc('day', s.goodbye_sent_at, 'UTC') AS current_goodbye_day,
           @window_margin::interval IS NOT NULL
           AND engagement_service_window_open(s.last_activity_at, now() + @clock_offset::interval)
           AND engagement_service_window_open(s.last_activity_at, now() + @clock_offset::interval + @window_margin::interval)
               AS window_open,
           CASE WHEN @quiet_start::interval IS NOT NULL AND NOT k.confirms_opt_out
                THEN coalesce(engagement_zone(p.timezone), @timezone)
           END AS tz
      FROM engagement_message_queue q
      CROSS JOIN LATERAL (SELECT @kinds::text::jsonb -> q.message_type AS kind,
                                 coalesce((@kinds::text::jsonb -> q.message_type ->> 'confirms_opt_out')::boolean, false)
                                     AS confirms_opt_out) k
      -- OFFSET 0 keeps a primary-key probe per message (as in
      -- recheck.sql): joined whole, the planner hashes every profile and
      -- state for a batch of 400.
      LEFT JOIN LATERAL (SELECT p.user_id, p.locale, p.reengagement_opt_out, p.timezone
                           FROM user_profiles p WHERE p.user_id = q.user_id OFFSET 0) p ON true
      LEFT JOIN LATERAL (SELECT s.user_id, s.state, s.goodbye_sent_at, s.goodbye_holdout, s.last_activity_at, s.created_at
                           FROM user_engagement_states s WHERE s.user_id = q.user_id OFFSET 0) s ON true
      LEFT JOIN LATERAL (SELECT e.user_id FROM engagement_erasures e WHERE e.user_id = q.user_id OFFSET 0) e ON true
     WHERE q.id = ANY (ARRAY(SELECT id FROM picked))
), checked AS (
    SELECT d.id, d.locale, d.waited, d.in_doubt,
           coalesce(CASE WHEN d.in_doubt AND d.operator_cancelled THEN 'operator'
                WHEN d.kind IS NOT NULL AND d.no_user THEN 'no_user'
                WHEN d.refusal IS NOT NULL THEN d.refusal
                WHEN d.kind IS NULL THEN NULL
                WHEN d.reengagement_opt_out AND NOT d.confirms_opt_out THEN 'opted_out'
                WHEN d.confirms_opt_out AND NOT d.reengagement_opt_out THEN 'stale'
                WHEN NOT (d.kind -> 'send_while') ? d.state THEN 'stale'
                WHEN (d.kind ->> 'current_goodbye_only')::boolean
                 AND d.period_start IS NOT NULL
                 AND d.period_start IS DISTINCT FROM d.current_goodbye_day THEN 'stale'
           END, CASE WHEN d.outside_reach THEN 'reachout_window' END) AS cancel_reason,
           engagement_quiet_until(now() + @clock_offset::interval, d.tz,
                                  @quiet_start::interval, @quiet_end::interval) AS quiet_until
      FROM due d
), capped AS (
    -- The per-user cap: each capped message still wanted, its place among
    -- its user's in this batch, and the user's capped messages sent or in
    -- flight in the window (an index probe per user), only when the cap is on.
    SELECT c.id, c.quiet_until, d.tz, d.replay_until,
           row_number() OVER (PARTITION BY d.user_id ORDER BY k.pos) + h.n - 1 AS ahead,
           h.oldest
      FROM checked c
      JOIN due d ON d.id = c.id
      JOIN picked k ON k.id = c.id
      CROSS JOIN LATERAL (
          SELECT count(*) AS n, min(coalesce(x.sent_at, now() + @clock_offset::interval)) AS oldest
            FROM engagement_message_queue x
           WHERE x.user_id = d.user_id
             AND x.status IN ('sent', 'processing')
             AND coalesce(x.sent_at, now() + @clock_offset::interval) > now() + @clock_offset::interval - @cap_window::interval
             AND coalesce((@kinds::text::jsonb -> x.message_type ->> 'capped')::boolean, false)) h
     WHERE @per_user_cap::int IS NOT NULL AND c.cancel_reason IS NULL
       AND coalesce((d.kind ->> 'capped')::boolean, false)
), over_cap AS (
    SELECT o.id,
           CASE WHEN o.frees > o.replay_until THEN 'frequency' END AS cancel,
           coalesce(engagement_quiet_until(o.frees, o.tz, @quiet_start::interval, @quiet_end::interval), o.frees) AS frees
      FROM (SELECT c.id, c.tz, c.replay_until,
                   coalesce(c.oldest, now() + @clock_offset::interval) + @cap_window::interval AS frees
              FROM capped c
             WHERE c.ahead >= @per_user_cap::int) o
), held_by_meta AS MATERIALIZED (
    -- Materialized: inlined into judged's join, the planner scanned the
    -- whole batch again for each of its messages (400 × 400 rows a claim,
    -- issue 59); once, it is a few rows at most, usually none.
    SELECT d.id,
           CASE WHEN d.message_key = ANY (@paused_keys::text[]) THEN 'template_paused' ELSE 'quality' END AS reason
      FROM due d
     WHERE d.message_key = ANY (@paused_keys::text[])
        OR (@quality_hold::boolean AND coalesce((d.kind ->> 'capped')::boolean, false))
), judged AS (
    SELECT c.id, c.locale, c.waited, c.in_doubt, coalesce(c.cancel_reason, CASE WHEN m.id IS NULL THEN o.cancel END) AS cancel_reason,
           CASE WHEN c.cancel_reason IS NOT NULL THEN NULL
                WHEN m.id IS NOT NULL THEN now() + @clock_offset::interval + @verdict_recheck::interval
                WHEN o.cancel IS NULL THEN coalesce(o.frees, c.quiet_until) END AS defer_until,
           CASE WHEN c.cancel_reason IS NOT NULL THEN NULL
                WHEN m.id IS NOT NULL THEN m.reason
                WHEN o.cancel IS NOT NULL THEN NULL
                WHEN o.id IS NOT NULL THEN 'frequency'
                WHEN c.quiet_until IS NOT NULL THEN 'quiet_hours' END AS deferred_reason
      FROM checked c
      LEFT JOIN over_cap o ON o.id = c.id
      LEFT JOIN held_by_meta m ON m.id = c.id
), verdict AS (
    -- A message in doubt (its holder died mid-batch on a transport that
    -- de-duplicates: its request may have reached the receiver, recover.sql)
    -- is never cancelled here: cancelled, a message the user may have got
    -- would say it was never sent. One no longer wanted is claimed as it
    -- is, with why (unwanted), for the processor to ask the receiver
    -- whether it had it (sent) or not (then cancelled), sending nothing.
    SELECT j.id, j.locale, j.waited,
           CASE WHEN NOT j.in_doubt THEN j.cancel_reason END AS cancel_reason,
           CASE WHEN j.in_doubt AND j.cancel_reason IS NOT NULL THEN NULL ELSE j.defer_until END AS defer_until,
           CASE WHEN j.in_doubt AND j.cancel_reason IS NOT NULL THEN NULL ELSE j.deferred_reason END AS deferred_reason,
           CASE WHEN j.in_doubt THEN j.cancel_reason END AS unwanted
      FROM judged j
), settled AS (
    UPDATE engagement_message_queue q
       SET status          = CASE WHEN v.cancel_reason IS NOT NULL THEN 'cancelled'
                                  WHEN v.defer_until IS NOT NULL THEN 'pending'
                                  ELSE 'processing' END,
           cancel_reason   = v.cancel_reason,
           deferred_reason = v.deferred_reason,
           scheduled_for   = coalesce(v.defer_until, q.scheduled_for),
           claimed_by      = CASE WHEN v.cancel_reason IS NULL AND v.defer_until IS NULL THEN @holder END,
           claimed_until   = CASE WHEN v.cancel_reason IS NULL AND v.defer_until IS NULL
                                  THEN now() + @claim_timeout::interval END
      FROM verdict v
     WHERE q.id = v.id
       -- The batch's ids again, as an array: joined to the CTE alone, the
       -- planner hashes every row of the queue, sent history included.
       AND q.id = ANY (ARRAY(SELECT id FROM due))
    RETURNING q.*, v.locale AS profile_locale, v.cancel_reason AS reason, v.defer_until, v.deferred_reason AS why,
              v.waited, v.unwanted
), spent AS (
    INSERT INTO engagement_send_budget_claims (transport, spent_at, recipients, message_ids, message_recipients)
    SELECT @transport, now() + @clock_offset::interval, count(DISTINCT coalesce(s.destination_jid, '')),
           array_agg(s.id), array_agg(md5(coalesce(s.destination_jid, ''))::uuid)
      FROM settled s
     WHERE @spend_limit::int IS NOT NULL AND s.reason IS NULL AND s.defer_until IS NULL AND NOT coalesce(s.in_doubt, false)
       AND NOT (SELECT d.window_open FROM due d WHERE d.id = s.id)
    HAVING count(*) > 0
    RETURNING id, recipients
), counted AS (
    UPDATE engagement_send_budgets b
       SET used = b.used + s.recipients
      FROM spent s
     WHERE b.transport = @transport
       AND b.used + s.recipients <= @spend_limit::int
    RETURNING b.used
)
SELECT CASE WHEN s.reason IS NOT NULL THEN 'cancelled:' || s.reason
            WHEN s.defer_until IS NOT NULL THEN 'deferred:' || s.why
            ELSE 'claimed' END               AS verdict,
       s.id::text,
       coalesce(s.user_id::text, '')       AS user_id,
       coalesce(s.message_type, '')        AS message_type,
       coalesce(s.message_key, '')         AS message_key,
       s.message_params::text              AS message_params,
       coalesce(nullif(btrim(s.profile_locale), ''), @default_locale) AS locale,
       coalesce(s.destination, '')         AS destination,
       coalesce(s.destination_jid, '')     AS destination_jid,
       coalesce(s.idempotency_key, s.id::text) AS idempotency_key,
       coalesce(s.retry_count, 0)         AS retry_count,
       s.scheduled_for,
       CASE WHEN NOT coalesce(s.in_doubt, false) AND NOT d.window_open THEN (SELECT id FROM spent) END AS spend_id,
       coalesce((SELECT used FROM counted),
                CASE WHEN EXISTS (SELECT FROM spent) THEN engagement_send_budget_full() END) AS budget_used,
       s.waited,
       coalesce(s.unwanted, '')            AS unwanted,
       coalesce(s.in_doubt, false)         AS in_doubt,
       d.window_open
  FROM settled s
  JOIN picked k ON k.id = s.id
  JOIN due d ON d.id = s.id
 ORDER BY k.pos;
