-- Step weekly_review: queues the weekly reviews of one chunk of
-- user_engagement_states (the rows whose ctid lies in [@first, @end)). No
-- state changes.
--
-- The chunk's users in state active or help_flow, with their transactions
-- of the window (@window_start, @as_of] counted (one probe of
-- transactions' (user_id, created_at) index each), those active in the
-- window (a transaction, or bot activity in last_activity_at) kept, their
-- profile read, and a review queued for each one who is not opted out and
-- has a destination (destination 'group' uses group_jid when set, else
-- whatsapp_jid): params {"count":"<transactions>"}, key user_id ||
-- @key_suffix (':weekly_review:YYYY-Www'), covering [@period_start,
-- @replay_until). Only the run's shard (@shard_index of @shard_count) is
-- seen: a @shard_count of 1 is every user.
--
-- A review queued by an earlier run of the week is a duplicate, found with
-- one index probe (and, racing another insert, by ON CONFLICT DO NOTHING,
-- which does not lock the review it finds), so a same-week re-run costs
-- little more than finding the week's users. No row is locked: states and
-- profiles are only read, and the queue has no foreign key.
--
-- Returns the chunk's counters: candidates, reviewed, queued, locked
-- (always 0), opted out, no destination.
WITH active AS MATERIALIZED (
    SELECT s.user_id, w.transactions,
           -- Queued by an earlier run of the week: a duplicate, found
           -- with one index probe and nothing more. (A scalar
           -- subquery, not EXISTS: the planner may run an EXISTS as
           -- a hash of every queued key, once per chunk.)
           (SELECT true FROM engagement_message_queue q
             WHERE q.idempotency_key = s.user_id::text || @key_suffix::text) IS NOT NULL AS queued_before
      FROM user_engagement_states s
      CROSS JOIN LATERAL (
          SELECT count(*)::int AS transactions FROM transactions t
           WHERE t.user_id = s.user_id AND t.created_at > @window_start AND t.created_at <= @as_of
      ) w
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state IN ('active', 'help_flow')
       AND (w.transactions > 0 OR (s.last_activity_at > @window_start AND s.last_activity_at <= @as_of))
       AND (@shard_count::int = 1
            OR ((hashtextextended(s.user_id::text, 0) & 9223372036854775807) % @shard_count::int) = @shard_index::int)
), chunk AS MATERIALIZED (
    -- OFFSET 0 keeps the profile a primary-key probe per user:
    -- joined plainly, the planner hashed every profile per chunk.
    SELECT a.user_id, a.transactions, a.queued_before,
           coalesce(p.skip_reason, '') AS skip_reason, p.destination, p.destination_jid
      FROM active a
      LEFT JOIN LATERAL (
          SELECT CASE WHEN p.reengagement_opt_out THEN 'opted_out'
                      WHEN NOT ((p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> '')
                                OR coalesce(btrim(p.whatsapp_jid), '') <> '') THEN 'no_destination'
                      ELSE '' END AS skip_reason,
                 CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                      THEN 'group' ELSE 'individual' END AS destination,
                 btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                            THEN p.group_jid ELSE p.whatsapp_jid END) AS destination_jid
            FROM user_profiles p
           WHERE p.user_id = a.user_id AND NOT a.queued_before
          OFFSET 0
      ) p ON true
), queued AS (
    INSERT INTO engagement_message_queue
           (user_id, message_type, message_key, message_params, destination, destination_jid,
            scheduled_for, idempotency_key, period_start, replay_until, job_run_id)
    SELECT c.user_id, @message_type, @message_key,
           jsonb_build_object('count', c.transactions::text),
           c.destination, c.destination_jid,
           least(@as_of::timestamptz, now()), c.user_id::text || @key_suffix::text,
           @period_start::timestamptz, @replay_until::timestamptz, @run_id::bigint
      FROM chunk c
     WHERE c.skip_reason = '' AND NOT c.queued_before
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING 1
)
SELECT count(*)::int,
       count(*) FILTER (WHERE skip_reason = '')::int,
       (SELECT count(*) FROM queued)::int,
       0,
       count(*) FILTER (WHERE skip_reason = 'opted_out')::int,
       count(*) FILTER (WHERE skip_reason = 'no_destination')::int
  FROM chunk
