-- Check claimed messages @ids against their users again, just before their
-- sends start (the claim checked them when it took them, maybe seconds
-- earlier), and cancel the ones no longer wanted: the rules are claim.sql's,
-- the rule of every door (engagement_refusal, migration 69) for every
-- type, and the rule of its kind in @kinds (statemachine's kinds table, as
-- JSON) for a kind:
--   a kind's user without a profile or state row      → 'no_user'
--   an erased user not opted back in                  → 'erased'
--   a marketing message (a kind's category, else the
--     operator's declared one, else marketing) to an
--     opted-out user                                  → 'opted_out'
--   a goodbye to a user held out of the current cycle → 'holdout'
--   a kind's user opted out of re-engagement          → 'opted_out'
--   an opt-out's confirmation (confirms_opt_out) whose
--     user opted back in                              → 'stale'
--   a user no longer in one of the kind's send_while
--     states, or (current_goodbye_only) a goodbye whose
--     period_start is another UTC day than the user's
--     goodbye_sent_at                                 → 'stale'
--   and, when still wanted, on a transport held to the reach-out window
--   (@reachout_window set, else NULL), a user whose last message to the
--   bot is older than it, as of the processor's clock (the database's,
--   @clock_offset ahead)                              → 'reachout_window'
-- Only messages @holder still holds (the fencing check): a claim lost
-- meanwhile is its new holder's to check. A cancelled message is
-- 'cancelled' with its cancel_reason and no longer claimed; it was never
-- sent, so the send ledger has nothing to say. The users are read without
-- a lock, and only the rows to cancel are locked, in id order (the one
-- order every statement on claimed rows takes): a check that cancels
-- nothing writes nothing. A message in doubt (in_doubt: its request may
-- have reached the receiver before a crash, recover.sql) is never cancelled
-- here; one no longer wanted is returned with why and cancelled false, for
-- the processor to ask the receiver first. Returns the messages no longer
-- wanted, why, and whether they were cancelled.
--
-- nullable: @reachout_window
-- not null: id, cancel_reason, cancelled
WITH checked AS (
    SELECT q.id, coalesce(q.in_doubt, false) AS in_doubt,
           coalesce(CASE WHEN k.kind IS NOT NULL AND (p.user_id IS NULL OR s.user_id IS NULL) THEN 'no_user'
                WHEN r.refusal IS NOT NULL THEN r.refusal
                WHEN k.kind IS NULL THEN NULL
                WHEN p.reengagement_opt_out AND NOT k.confirms_opt_out THEN 'opted_out'
                WHEN k.confirms_opt_out AND NOT p.reengagement_opt_out THEN 'stale'
                WHEN NOT (k.kind -> 'send_while') ? s.state THEN 'stale'
                WHEN (k.kind ->> 'current_goodbye_only')::boolean
                 AND q.period_start IS NOT NULL
                 AND q.period_start IS DISTINCT FROM date_trunc('day', s.goodbye_sent_at, 'UTC') THEN 'stale'
           END,
           CASE WHEN @reachout_window::interval IS NOT NULL
                 AND coalesce(s.last_activity_at < now() + @clock_offset::interval - @reachout_window::interval, true)
                THEN 'reachout_window' END) AS cancel_reason
      -- The batch's rows by a primary-key probe each (OFFSET 0: planned on
      -- its own), then the fencing check: planned together, statistics
      -- from before the claims (a queue analyzed while all of it was
      -- pending) made the processing index look like one row, and the
      -- planner read every row every process had claimed to find the
      -- batch's; planned as one scan for all the ids, a whole backlog.
      FROM unnest(@ids::uuid[]) AS b(id)
     CROSS JOIN LATERAL (SELECT * FROM engagement_message_queue q WHERE q.id = b.id OFFSET 0) q
      CROSS JOIN LATERAL (SELECT @kinds::text::jsonb -> q.message_type AS kind,
                                 coalesce((@kinds::text::jsonb -> q.message_type ->> 'confirms_opt_out')::boolean, false)
                                     AS confirms_opt_out) k
      -- OFFSET 0 keeps a primary-key probe per message: joined whole, the
      -- planner hashes both tables (5 ms at 5,000 users, growing with them,
      -- for 25 messages).
      LEFT JOIN LATERAL (SELECT p.user_id, p.reengagement_opt_out
                           FROM user_profiles p WHERE p.user_id = q.user_id OFFSET 0) p ON true
      LEFT JOIN LATERAL (SELECT s.user_id, s.state, s.goodbye_sent_at, s.goodbye_holdout, s.last_activity_at, s.created_at
                           FROM user_engagement_states s WHERE s.user_id = q.user_id OFFSET 0) s ON true
      LEFT JOIN LATERAL (SELECT e.user_id FROM engagement_erasures e WHERE e.user_id = q.user_id OFFSET 0) e ON true
      CROSS JOIN LATERAL (
          SELECT engagement_refusal(coalesce(k.kind ->> 'category',
                                             (SELECT t.category FROM engagement_message_types t WHERE t.message_type = q.message_type)),
                                    e.user_id IS NOT NULL AND coalesce(p.reengagement_opt_out, true),
                                    coalesce(p.reengagement_opt_out, false),
                                    coalesce((k.kind ->> 'holdout')::boolean AND s.goodbye_holdout
                                             AND coalesce(s.last_activity_at, s.created_at) <= s.goodbye_sent_at, false)) AS refusal
      ) r
     WHERE q.status = 'processing'
       AND q.claimed_by = @holder
), doomed AS (
    -- Each row to cancel, locked by its primary key in id order (the outer
    -- rows' order), then the fencing check on the row as locked (its
    -- newest version). Joined whole, the planner scanned every claimed
    -- row of the queue once per checked message (400 ms for a batch of
    -- 400 beside 4,000 claimed rows).
    SELECT l.id, c.cancel_reason
      FROM (SELECT id, cancel_reason FROM checked WHERE cancel_reason IS NOT NULL AND NOT in_doubt ORDER BY id) c
     CROSS JOIN LATERAL (SELECT q.id, q.status, q.claimed_by FROM engagement_message_queue q
                          WHERE q.id = c.id OFFSET 0 FOR UPDATE) l
     WHERE l.status = 'processing'
       AND l.claimed_by = @holder
), cancelled AS (
    UPDATE engagement_message_queue q
       SET status = 'cancelled',
           cancel_reason = d.cancel_reason,
           claimed_by = NULL,
           claimed_until = NULL
      FROM doomed d
     WHERE q.id = d.id
       -- The ids again, as an array: joined to the CTE alone, the planner
       -- may hash every row of the queue.
       AND q.id = ANY (ARRAY(SELECT id FROM doomed))
    RETURNING q.id, d.cancel_reason
)
SELECT id::text, cancel_reason, true AS cancelled FROM cancelled
UNION ALL
SELECT id::text, cancel_reason, false FROM checked WHERE cancel_reason IS NOT NULL AND in_doubt;
