-- Claim up to @batch due pending messages, oldest first, for @holder until
-- now() + @claim_timeout. FOR UPDATE SKIP LOCKED lets any number of
-- processes claim side by side, each message going to exactly one of them.
-- "Now" is the processor's clock: the database's, @clock_offset ahead (0
-- but in a simulation: queue-process --as-of).
--
-- Each due message is first checked against its user as they are now, by
-- the rule of its kind in @kinds (statemachine's kinds table, as JSON:
-- {"goodbye": {"send_while": ["goodbye_sent"], "current_goodbye_only":
-- true}, …}; a type without a rule is claimed unchecked):
--   no user profile or state row            → cancelled, 'no_user'
--   opted out of re-engagement              → cancelled, 'opted_out'
--   a user no longer in one of the kind's send_while states
--     (a goodbye's user who answered or came back; a weekly review's
--     user sent a goodbye since)                                → 'stale'
--   with current_goodbye_only, a message whose period_start is another
--     UTC day than the user's goodbye_sent_at (one queued without a
--     period_start is checked on the state alone)               → 'stale'
-- A message still wanted but due inside the quiet hours (@quiet_start to
-- @quiet_end, NULL when off, may wrap midnight) in the user's time zone
-- (user_profiles.timezone as PostgreSQL reads it, engagement_zone(), else
-- @timezone) stays pending, moved to the end of the quiet hours
-- (engagement_quiet_until), deferred_reason 'quiet_hours'.
--
-- Under a send budget (@daily_limit, NULL when none: at most that many
-- distinct recipients on @transport in any @window), the statement before
-- this one in the same transaction locked the transport's
-- engagement_send_budgets row and dropped the recipients out of the window
-- (budget_lock.sql, budget_prune.sql), so claims take slots one at a time.
-- A recipient is the address a message goes to (destination_jid: a number
-- or a group), kept as its MD5, a uuid: the budget stores no JID. A
-- message to a recipient already in the window costs nothing; the others
-- take the free slots in the order they came due, one per recipient. The
-- rest stay pending, deferred_reason 'budget', each moved to its place in
-- line: after the messages already waiting on the budget, the n-th in line
-- is due when the n-th slot frees (a recipient leaves the window @window
-- after their last claim; a turn of the window later for the n-th past the
-- limit), a microsecond after the one before it so that the line keeps its
-- order, and out of the quiet hours. Each recipient claimed is stamped
-- with this claim (engagement_send_budget_recipients), and the row counts
-- the new ones.
--
-- Nullable columns come back coalesced and the params as raw JSON text, so
-- no row can make the claim itself fail: a row that cannot be delivered
-- fails alone, when its turn comes.
WITH due AS (
    SELECT q.id, md5(coalesce(q.destination_jid, ''))::uuid AS recipient, q.scheduled_for, @kinds::jsonb -> q.message_type AS kind, q.period_start, p.locale,
           p.user_id IS NULL OR s.user_id IS NULL AS no_user,
           p.reengagement_opt_out, s.state,
           date_trunc('day', s.goodbye_sent_at, 'UTC') AS current_goodbye_day,
           CASE WHEN @quiet_start::interval IS NOT NULL
                THEN coalesce(engagement_zone(p.timezone), @timezone)
           END AS tz
      FROM engagement_message_queue q
      LEFT JOIN user_profiles p ON p.user_id = q.user_id
      LEFT JOIN user_engagement_states s ON s.user_id = q.user_id
     WHERE q.status = 'pending' AND q.scheduled_for <= now() + @clock_offset::interval
     ORDER BY q.scheduled_for
     LIMIT @batch
       FOR UPDATE OF q SKIP LOCKED
), checked AS (
    SELECT d.id, d.recipient, d.locale, d.tz,
           row_number() OVER (ORDER BY d.scheduled_for, d.id) AS pos,
           CASE WHEN d.kind IS NULL THEN NULL
                WHEN d.no_user THEN 'no_user'
                WHEN d.reengagement_opt_out THEN 'opted_out'
                WHEN NOT (d.kind -> 'send_while') ? d.state THEN 'stale'
                WHEN (d.kind ->> 'current_goodbye_only')::boolean
                 AND d.period_start IS NOT NULL
                 AND d.period_start IS DISTINCT FROM d.current_goodbye_day THEN 'stale'
           END AS cancel_reason,
           engagement_quiet_until(now() + @clock_offset::interval, d.tz,
                                  @quiet_start::interval, @quiet_end::interval) AS quiet_until
      FROM due d
), sendable AS (
    -- The messages that go now unless the budget holds them: whether their
    -- recipient is in the window already, and where they first appear.
    SELECT c.id, c.recipient, c.tz, c.pos,
           min(c.pos) OVER (PARTITION BY c.recipient) AS first_pos,
           @daily_limit::int IS NULL
           OR EXISTS (SELECT FROM engagement_send_budget_recipients r
                       WHERE r.transport = @transport AND r.recipient = c.recipient) AS known
      FROM checked c
     WHERE c.cancel_reason IS NULL AND c.quiet_until IS NULL
), ranked AS (
    -- A new recipient's place among this claim's new recipients, and
    -- whether a slot is left for it.
    SELECT s.*,
           CASE WHEN NOT s.known THEN dense_rank() OVER (PARTITION BY s.known ORDER BY s.first_pos) END AS new_rank,
           @daily_limit::int - (SELECT b.used FROM engagement_send_budgets b WHERE b.transport = @transport) AS free
      FROM sendable s
), held AS (
    -- The messages over the budget, each with its place in line, j: after
    -- the messages waiting in it already. The line's length and the
    -- instants the window's slots free (the recipients' last claims, this
    -- claim's at now, in order) are read once, and only when a message is
    -- over the budget.
    SELECT k.id, k.tz,
           (SELECT count(*) FROM engagement_message_queue w
             WHERE w.status = 'pending' AND w.deferred_reason = 'budget'
               AND w.scheduled_for > now() + @clock_offset::interval)
           + k.new_rank - greatest(k.free, 0) - 1 AS j,
           (SELECT array_agg(e.at ORDER BY e.at)
              FROM (SELECT CASE WHEN r.recipient IN (SELECT n.recipient FROM ranked n WHERE n.known)
                                THEN now() + @clock_offset::interval ELSE r.spent_at END AS at
                      FROM engagement_send_budget_recipients r
                     WHERE r.transport = @transport
                    UNION ALL
                    SELECT now() + @clock_offset::interval
                      FROM ranked n
                     WHERE NOT n.known AND n.new_rank <= n.free AND n.pos = n.first_pos) e) AS frees
      FROM ranked k
     WHERE NOT k.known AND k.new_rank > k.free
), budget_defer AS (
    -- The n-th in line goes when the n-th slot frees; past the limit, a
    -- turn of the window later.
    SELECT h.id, h.tz,
           coalesce(h.frees[greatest(cardinality(h.frees) - @daily_limit::int, 0) + h.j % @daily_limit::int + 1],
                    now() + @clock_offset::interval)
           + @window::interval * (1 + h.j / @daily_limit::int)
           + h.j * interval '1 microsecond' AS at
      FROM held h
), verdict AS (
    SELECT c.id, c.locale, c.cancel_reason,
           coalesce(c.quiet_until,
                    coalesce(engagement_quiet_until(b.at, b.tz, @quiet_start::interval, @quiet_end::interval), b.at))
               AS defer_until,
           CASE WHEN c.quiet_until IS NOT NULL THEN 'quiet_hours'
                WHEN b.id IS NOT NULL THEN 'budget' END AS deferred_reason
      FROM checked c
      LEFT JOIN budget_defer b ON b.id = c.id
), spent AS (
    -- Each recipient claimed, stamped with this claim (one row each).
    INSERT INTO engagement_send_budget_recipients AS r (transport, recipient, spent_at, message_id)
    SELECT DISTINCT ON (k.recipient) @transport, k.recipient, now() + @clock_offset::interval, k.id
      FROM ranked k
     WHERE @daily_limit::int IS NOT NULL AND (k.known OR k.new_rank <= k.free)
     ORDER BY k.recipient, k.pos
        ON CONFLICT (transport, recipient) DO UPDATE
       SET previous_spent_at = r.spent_at,
           spent_at = EXCLUDED.spent_at,
           message_id = EXCLUDED.message_id
    RETURNING r.previous_spent_at IS NULL AS new
), counted AS (
    UPDATE engagement_send_budgets b
       SET used = b.used + (SELECT count(*) FROM spent WHERE spent.new)
     WHERE b.transport = @transport AND @daily_limit::int IS NOT NULL
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
    RETURNING q.*, v.locale AS profile_locale, v.cancel_reason AS reason, v.defer_until, v.deferred_reason AS why
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
       s.scheduled_for
  FROM settled s
 ORDER BY s.scheduled_for, s.id;
