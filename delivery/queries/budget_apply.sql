-- Hold back the messages of a claim (@ids, in the order claim.sql took
-- them, still claimed by @holder) that @transport's send budget has no
-- room for: at most @daily_limit distinct recipients in any @window. Runs
-- after budget_lock.sql and budget_prune.sql, in their transaction, so
-- claims on one transport take their slots one at a time, whichever
-- process they come from. While the window has ample room the claim ran
-- before, side by side with other claims; near the limit, in the same
-- transaction, after the lock, so the slots go in due order.
--
-- A recipient is the address a message goes to (destination_jid: a number
-- or a group), kept as its MD5, a uuid: the budget stores no JID. A
-- message to a recipient stamped in the window already costs nothing
-- (the slots of claims made with ample room, claim.sql, are counted
-- but not by recipient); the others
-- take the free slots in claim order (the order they came due), one per
-- recipient, and each recipient is stamped with this claim
-- (engagement_send_budget_recipients; the row's used counts the new ones).
--
-- The rest go back to pending, their retries unspent, deferred_reason
-- 'budget', each moved to its place in line: after the messages waiting on
-- the budget already, the n-th in line is due when the n-th slot frees (a
-- recipient leaves the window @window after their last claim; a turn of
-- the window later for the n-th past the limit), a microsecond after the
-- one before it so that the line keeps its order, and out of the quiet
-- hours in its user's time zone (as claim.sql reads them). "Now" is the
-- processor's clock, @clock_offset ahead of the database's. Returns the
-- ids held back, and how many recipients the window holds now.
WITH claimed AS (
    SELECT q.id, o.pos, md5(coalesce(q.destination_jid, ''))::uuid AS recipient,
           CASE WHEN @quiet_start::interval IS NOT NULL
                THEN coalesce(engagement_zone(p.timezone), @timezone)
           END AS tz
      FROM unnest(@ids::uuid[]) WITH ORDINALITY AS o(id, pos)
      JOIN engagement_message_queue q ON q.id = o.id
      LEFT JOIN user_profiles p ON p.user_id = q.user_id
     WHERE q.status = 'processing' AND q.claimed_by = @holder
), known AS (
    -- Whether each recipient is in the window already, and where it first
    -- appears in the claim.
    SELECT c.*,
           min(c.pos) OVER (PARTITION BY c.recipient) AS first_pos,
           EXISTS (SELECT FROM engagement_send_budget_recipients r
                    WHERE r.transport = @transport AND r.recipient = c.recipient) AS known
      FROM claimed c
), ranked AS (
    -- A new recipient's place among the claim's new recipients, and the
    -- slots free.
    SELECT k.*,
           CASE WHEN NOT k.known THEN dense_rank() OVER (PARTITION BY k.known ORDER BY k.first_pos) END AS new_rank,
           @daily_limit::int - (SELECT b.used FROM engagement_send_budgets b WHERE b.transport = @transport) AS free
      FROM known k
), held AS (
    -- The messages over the budget, each with its place in line, j. The
    -- line's length and the instants the window's slots free (the
    -- recipients' last claims, the slots of claims made with room, this
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
                    SELECT c.spent_at
                      FROM engagement_send_budget_claims c, generate_series(1, c.recipients)
                     WHERE c.transport = @transport
                    UNION ALL
                    SELECT now() + @clock_offset::interval
                      FROM ranked n
                     WHERE NOT n.known AND n.new_rank <= n.free AND n.pos = n.first_pos) e) AS frees
      FROM ranked k
     WHERE NOT k.known AND k.new_rank > k.free
), placed AS (
    -- The n-th in line goes when the n-th slot frees; past the limit, a
    -- turn of the window later.
    SELECT h.id, h.tz,
           coalesce(h.frees[greatest(cardinality(h.frees) - @daily_limit::int, 0) + h.j % @daily_limit::int + 1],
                    now() + @clock_offset::interval)
           + @window::interval * (1 + h.j / @daily_limit::int)
           + h.j * interval '1 microsecond' AS at
      FROM held h
), deferred AS (
    UPDATE engagement_message_queue q
       SET status          = 'pending',
           deferred_reason = 'budget',
           scheduled_for   = coalesce(engagement_quiet_until(p.at, p.tz, @quiet_start::interval, @quiet_end::interval), p.at),
           claimed_by      = NULL,
           claimed_until   = NULL
      FROM placed p
     WHERE q.id = p.id
    RETURNING q.id
), spent AS (
    INSERT INTO engagement_send_budget_recipients AS r (transport, recipient, spent_at, message_id)
    SELECT DISTINCT ON (k.recipient) @transport, k.recipient, now() + @clock_offset::interval, k.id
      FROM ranked k
     WHERE k.known OR k.new_rank <= k.free
     ORDER BY k.recipient, k.pos
        ON CONFLICT (transport, recipient) DO UPDATE
       SET previous_spent_at = r.spent_at,
           spent_at = EXCLUDED.spent_at,
           message_id = EXCLUDED.message_id
    RETURNING r.previous_spent_at IS NULL AS new
), counted AS (
    UPDATE engagement_send_budgets b
       SET used = b.used + (SELECT count(*) FROM spent WHERE spent.new)
     WHERE b.transport = @transport
)
SELECT coalesce((SELECT array_agg(id::text) FROM deferred), '{}'),
       (SELECT used FROM engagement_send_budgets WHERE transport = @transport)
       + (SELECT count(*) FROM spent WHERE spent.new)::int;
