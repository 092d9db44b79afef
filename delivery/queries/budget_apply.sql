-- Hold back the messages of a claim (@ids, in the order claim.sql took
-- them, still claimed by @holder; @waited says which of them waited on the
-- budget until the claim) that @transport's send budget has no room for:
-- at most @daily_limit distinct recipients in any @window. Runs after
-- budget_lock.sql and budget_prune.sql, in their transaction, so claims on
-- one transport take their slots one at a time, whichever process they
-- come from. While the window has ample room the claim ran before, side by
-- side with other claims; near the limit, in the same transaction, after
-- the lock, so the slots go in line order.
--
-- A recipient is the address a message goes to (destination_jid: a number
-- or a group), kept as its MD5, a uuid: the budget stores no JID. A
-- message to a recipient stamped in the window already costs nothing
-- (the slots of claims made with ample room, claim.sql, are counted
-- but not by recipient); the others take the free slots in line order, one
-- per recipient: first the messages that waited on the budget (they were
-- the head of the line), then the others, each in claim order (the order
-- they came due). Each recipient is stamped with this claim
-- (engagement_send_budget_recipients; the row's used counts the new ones).
--
-- The rest go back to pending, their retries unspent, deferred_reason
-- 'budget', each moved to its place in line. A message that waited keeps
-- its place: it stays at the head, ahead of every message waiting (its
-- time was a forecast: the slot it was due to take frees a window after
-- the claim that spent it, and that claim may have come later than
-- forecast). Any other goes behind every message waiting. The n-th in line
-- is due when the n-th slot frees (a recipient leaves the window @window
-- after their last claim; a turn of the window later for the n-th past the
-- limit), a microsecond after the one before it, and out of the quiet hours
-- in its user's time zone (as claim.sql reads them). The line's times
-- never go backwards: a message placed at the back goes after the last one
-- waiting, and the messages waiting behind one that kept its place at the
-- head move back to after it (those a concurrent claim holds are left to
-- it). With @kind_priority (queue-process --kind-priority), the claim's
-- order is the line's: the new recipients take the free slots in claim
-- order, and a message placed at the back goes behind the messages waiting
-- of its own type or of a type listed before it only (a goodbye is not put
-- behind a week of weekly reviews); where it meets a later type's message
-- at the same slot, the next claim's order decides. "Now" is the processor's clock, @clock_offset ahead of the
-- database's. Returns the ids held back, and how many recipients the
-- window holds now.
--
-- nullable: @quiet_start, @quiet_end
-- not null: used
WITH claimed AS (
    SELECT q.id, o.pos, coalesce(o.waited, false) AS waited,
           CASE WHEN cardinality(@kind_priority::text[]) > 0
                THEN coalesce(array_position(@kind_priority::text[], q.message_type),
                              cardinality(@kind_priority::text[]) + 1) END AS rank,
           md5(coalesce(q.destination_jid, ''))::uuid AS recipient,
           CASE WHEN @quiet_start::interval IS NOT NULL
                THEN coalesce(engagement_zone(p.timezone), @timezone)
           END AS tz
      FROM unnest(@ids::uuid[], @waited::boolean[]) WITH ORDINALITY AS o(id, waited, pos)
      JOIN engagement_message_queue q ON q.id = o.id
      LEFT JOIN user_profiles p ON p.user_id = q.user_id
     WHERE q.status = 'processing' AND q.claimed_by = @holder
), known AS (
    -- Whether each recipient is in the window already, and its place in
    -- the claim's line: where it first appears among the messages that
    -- waited, else among the others (after all that waited).
    SELECT c.*,
           min(CASE WHEN c.waited THEN c.pos ELSE c.pos + cardinality(@ids::uuid[]) END)
               OVER (PARTITION BY c.recipient) AS first_pos,
           min(c.pos) OVER (PARTITION BY c.recipient) AS line_pos,
           EXISTS (SELECT FROM engagement_send_budget_recipients r
                    WHERE r.transport = @transport AND r.recipient = c.recipient) AS known
      FROM claimed c
), ranked AS (
    -- A new recipient's place among the claim's new recipients, and the
    -- slots free.
    SELECT k.*,
           CASE WHEN NOT k.known THEN dense_rank() OVER (PARTITION BY k.known ORDER BY
                CASE WHEN k.rank IS NOT NULL THEN k.line_pos ELSE k.first_pos END) END AS new_rank,
           @daily_limit::int - (SELECT b.used FROM engagement_send_budgets b WHERE b.transport = @transport) AS free
      FROM known k
), waiting AS (
    -- The messages waiting on the budget outside this claim (its own are
    -- processing), and the last one's time: all of them (rank NULL), or
    -- with @kind_priority those of each rank the claim holds or a rank
    -- before it.
    SELECT r.rank, count(w.id) AS n, max(w.scheduled_for) AS last
      FROM (SELECT DISTINCT c.rank FROM claimed c) r
      LEFT JOIN engagement_message_queue w
        ON w.status = 'pending' AND w.deferred_reason = 'budget'
       AND (r.rank IS NULL
            OR coalesce(array_position(@kind_priority::text[], w.message_type),
                        cardinality(@kind_priority::text[]) + 1) <= r.rank)
     GROUP BY r.rank
), held AS (
    -- The messages over the budget, each with its place in line, j: at the
    -- head for a recipient whose message waited, behind every message
    -- waiting for the others. The instants the window's slots free (the
    -- recipients' last claims, the slots of claims made with room, this
    -- claim's at now, in order) are read once, and only when a message is
    -- over the budget.
    SELECT k.id, k.tz,
           CASE WHEN k.first_pos <= cardinality(@ids::uuid[]) THEN 0
                ELSE (SELECT w.n FROM waiting w WHERE w.rank IS NOT DISTINCT FROM k.rank) END
           + k.new_rank - greatest(k.free, 0) - 1 AS j,
           CASE WHEN k.first_pos > cardinality(@ids::uuid[])
                THEN (SELECT w.last FROM waiting w WHERE w.rank IS NOT DISTINCT FROM k.rank) END AS after,
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
                      FROM (SELECT DISTINCT n.recipient FROM ranked n WHERE NOT n.known AND n.new_rank <= n.free) n) e) AS frees
      FROM ranked k
     WHERE NOT k.known AND k.new_rank > k.free
), placed AS (
    -- The n-th in line goes when the n-th slot frees; past the limit, a
    -- turn of the window later; at the back, never before the last one
    -- waiting.
    SELECT h.id, h.tz,
           greatest(coalesce(h.frees[greatest(cardinality(h.frees) - @daily_limit::int, 0) + h.j % @daily_limit::int + 1],
                             now() + @clock_offset::interval)
                    + @window::interval * (1 + h.j / @daily_limit::int)
                    + h.j * interval '1 microsecond',
                    h.after + (h.j + 1) * interval '1 microsecond') AS at,
           h.after IS NULL AS head
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
    RETURNING q.id, q.scheduled_for, p.head
), behind AS (
    -- The messages waiting behind those that kept their place at the head
    -- and due before the last of them (looked for up to a second past it),
    -- in line order, but those another claim holds: they move back to
    -- after it, each a microsecond after the one before or where it was,
    -- whichever is later.
    SELECT b.id, b.scheduled_for, row_number() OVER (ORDER BY b.scheduled_for, b.id) AS n,
           (SELECT max(d.scheduled_for) FROM deferred d WHERE d.head) AS head_last
      FROM (SELECT w.id, w.scheduled_for
              FROM engagement_message_queue w
             WHERE w.status = 'pending' AND w.deferred_reason = 'budget'
               AND w.scheduled_for < (SELECT max(d.scheduled_for) FROM deferred d WHERE d.head) + interval '1 second'
               FOR UPDATE SKIP LOCKED) b
), moved AS (
    UPDATE engagement_message_queue q
       SET scheduled_for = m.at
      FROM (SELECT b.id, b.scheduled_for,
                   b.n * interval '1 microsecond'
                   + greatest(b.head_last, max(b.scheduled_for - b.n * interval '1 microsecond')
                                               OVER (ORDER BY b.n ROWS UNBOUNDED PRECEDING)) AS at
              FROM behind b) m
     WHERE q.id = m.id AND m.at > m.scheduled_for
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
SELECT coalesce((SELECT array_agg(id::text) FROM deferred), '{}') AS held,
       (SELECT used FROM engagement_send_budgets WHERE transport = @transport)
       + (SELECT count(*) FROM spent WHERE spent.new)::int AS used;
