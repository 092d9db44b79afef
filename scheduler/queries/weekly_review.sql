-- Step weekly_review: queues the weekly reviews of one chunk of
-- user_engagement_states (the rows whose ctid lies in [@first, @end)). No
-- state changes.
--
-- The chunk's users in state active or help_flow, with their transactions
-- of the window (@window_start, @as_of] counted (one probe of
-- transactions' (user_id, created_at) index each), those active in the
-- window (a transaction, or bot activity in last_activity_at) kept, their
-- profile read (one primary-key probe each), and a review queued for each
-- one who is not opted out and has a destination (destination 'group' uses
-- group_jid when set, else whatsapp_jid): params {"count":"<transactions>"},
-- key user_id || @key_suffix (':weekly_review:YYYY-Www'), covering
-- [@period_start, @replay_until). Only the run's shard (@shard_index of
-- @shard_count) is seen: a @shard_count of 1 is every user.
--
-- A review queued by an earlier run of the week is a duplicate: INSERT …
-- ON CONFLICT DO NOTHING finds it with the unique index's own check, before
-- writing anything (and does not lock the review it finds). The queue is
-- probed beforehand only for the few users the profile would skip (opted
-- out, no destination): one of them whose review an earlier run of the
-- week queued counts as done (a duplicate), not skipped. A probe for every
-- user, as before, cost each first-run review a second descent of the
-- idempotency-key index (about 15% of the statement's buffer accesses) to
-- spare a same-week re-run the profile probes it now makes. No row is
-- locked: states and profiles are only read, and the queue has no foreign
-- key.
--
-- Returns the chunk's counters: candidates, reviewed, queued, locked
-- (always 0), opted out, no destination.
WITH chunk AS MATERIALIZED (
    SELECT s.user_id, w.transactions, p.destination, p.destination_jid,
           -- '' to review; 'queued_before' for a user the profile skips
           -- but an earlier run of the week reviewed; else the skip reason.
           CASE WHEN p.skip_reason = '' THEN ''
                -- A scalar subquery, not EXISTS: the planner may run an
                -- EXISTS as a hash of every queued key, once per chunk.
                WHEN (SELECT true FROM engagement_message_queue q
                       WHERE q.idempotency_key = s.user_id::text || @key_suffix::text) THEN 'queued_before'
                ELSE p.skip_reason END AS skip_reason
      FROM user_engagement_states s
      CROSS JOIN LATERAL (
          SELECT count(*)::int AS transactions FROM transactions t
           WHERE t.user_id = s.user_id AND t.created_at > @window_start AND t.created_at <= @as_of
      ) w
      -- OFFSET 0 keeps the profile a primary-key probe per user: joined
      -- plainly, the planner hashed every profile per chunk. (Every state
      -- row has its profile: a foreign key.)
      CROSS JOIN LATERAL (
          SELECT CASE WHEN p.reengagement_opt_out THEN 'opted_out'
                      WHEN NOT ((p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> '')
                                OR coalesce(btrim(p.whatsapp_jid), '') <> '') THEN 'no_destination'
                      ELSE '' END AS skip_reason,
                 CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                      THEN 'group' ELSE 'individual' END AS destination,
                 btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                            THEN p.group_jid ELSE p.whatsapp_jid END) AS destination_jid
            FROM user_profiles p
           WHERE p.user_id = s.user_id
          OFFSET 0
      ) p
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state IN ('active', 'help_flow')
       AND (w.transactions > 0 OR (s.last_activity_at > @window_start AND s.last_activity_at <= @as_of))
       AND (@shard_count::int = 1
            OR ((hashtextextended(s.user_id::text, 0) & 9223372036854775807) % @shard_count::int) = @shard_index::int)
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
     WHERE c.skip_reason = ''
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING 1
)
SELECT count(*)::int,
       count(*) FILTER (WHERE skip_reason IN ('', 'queued_before'))::int,
       (SELECT count(*) FROM queued)::int,
       0,
       count(*) FILTER (WHERE skip_reason = 'opted_out')::int,
       count(*) FILTER (WHERE skip_reason = 'no_destination')::int
  FROM chunk
