-- Step weekly_review: queues the weekly reviews of one chunk of
-- user_engagement_states (the rows whose ctid lies in [@first, @end)). No
-- state changes.
--
-- The chunk's users in @states (the review kind's send-time states: active
-- and help_flow), with their transactions
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
-- A review queued by an earlier run of the week is a duplicate. In a first
-- run (no review in the chunk yet) INSERT … ON CONFLICT DO NOTHING finds
-- any with the unique index's own check, before writing anything, and the
-- queue is probed beforehand only for the few users the profile skips
-- (opted out, no destination): probing every user, as before, cost each
-- review a second descent of the idempotency-key index. In a same-week
-- re-run each user's review is probed first and found, so neither the
-- profile nor the insert is touched: little more than finding the week's
-- users. Either way a user reviewed earlier in the week counts as done,
-- even when now opted out. ON CONFLICT does not lock the review it finds;
-- no row is locked at all: states and profiles are only read, and the
-- queue has no foreign key.
--
-- A dry run (@dry_run: engagement-weekly --dry-run) is this statement over
-- the whole table, with @first and @end spanning every row: it queues
-- nothing (queued is empty) and counts instead the reviews it would queue
-- (would). It decides who is skipped by the profile as it is now, as the
-- dry run always has: no probe for an earlier run, and a user reviewed
-- earlier in the week who opted out since counts as skipped, not done.
--
-- Returns the chunk's counters: candidates, reviewed, queued, locked
-- (always 0), opted out, no destination; in a dry run, what the step would
-- do.
-- nullable: @run_id
WITH rerun AS MATERIALIZED (
    -- Did an earlier run of the week review this chunk? Asked of its first
    -- few users active in the window (8 index probes): true in a same-week
    -- re-run, false in a first run. It only picks the cheaper of two
    -- equivalent ways below, so a wrong guess (a chunk an earlier run only
    -- half did) costs time, never a different result.
    SELECT coalesce(bool_or((SELECT true FROM engagement_message_queue q
                              WHERE q.idempotency_key = s.user_id::text || @key_suffix::text)), false) AS probe
      FROM (SELECT s.user_id FROM user_engagement_states s
             WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
               AND s.state = ANY(@states::text[])
               AND s.last_activity_at > @window_start AND s.last_activity_at <= @as_of
               AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
               AND NOT @dry_run::boolean
             LIMIT 8) s
), chunk AS MATERIALIZED (
    SELECT s.user_id, w.transactions, p.destination, p.destination_jid,
           -- '' to review (the insert's conflict check finds an earlier
           -- review); 'queued_before' for a user an earlier run of the week
           -- reviewed, who counts as done even when the profile would now
           -- skip them; else the skip reason.
           CASE WHEN p.skip_reason IS NULL THEN 'queued_before' -- found by the probe below
                WHEN p.skip_reason = '' THEN ''
                -- A scalar subquery, not EXISTS: the planner may run an
                -- EXISTS as a hash of every queued key, once per chunk.
                WHEN NOT r.probe AND NOT @dry_run::boolean
                     AND (SELECT true FROM engagement_message_queue q
                                       WHERE q.idempotency_key = s.user_id::text || @key_suffix::text) THEN 'queued_before'
                ELSE p.skip_reason END AS skip_reason
      FROM user_engagement_states s
      CROSS JOIN rerun r
      CROSS JOIN LATERAL (
          SELECT count(*)::int AS transactions FROM transactions t
           WHERE t.user_id = s.user_id AND t.created_at > @window_start AND t.created_at <= @as_of
      ) w
      -- OFFSET 0 keeps the profile a primary-key probe per user: joined
      -- plainly, the planner hashed every profile per chunk. In a re-run
      -- (r.probe) the queue is probed first and a reviewed user's profile
      -- is not read at all (a one-time filter; every state row has its
      -- profile, a foreign key, so no row here means "reviewed").
      LEFT JOIN LATERAL (
          SELECT p.skip_reason, p.destination, p.destination_jid
            FROM engagement_send_route(s.user_id) p
           WHERE NOT (r.probe AND (SELECT true FROM engagement_message_queue q
                                    WHERE q.idempotency_key = s.user_id::text || @key_suffix::text) IS NOT NULL)
          OFFSET 0
      ) p ON true
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state = ANY(@states::text[])
       AND (w.transactions > 0 OR (s.last_activity_at > @window_start AND s.last_activity_at <= @as_of))
       AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
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
     WHERE c.skip_reason = '' AND NOT @dry_run::boolean
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING idempotency_key AS k
), would AS MATERIALIZED (
    -- A dry run's new reviews: its users to review whose key is not taken yet.
    SELECT FROM chunk c
     WHERE @dry_run::boolean AND c.skip_reason = ''
       AND NOT EXISTS (SELECT FROM engagement_message_queue q
                        WHERE q.idempotency_key = c.user_id::text || @key_suffix::text)
)
SELECT count(*)::int AS candidates,
       count(*) FILTER (WHERE skip_reason IN ('', 'queued_before'))::int AS moved, -- reviewed
       ((SELECT count(*) FROM queued) + (SELECT count(*) FROM would))::int AS queued,
       0 AS locked,
       count(*) FILTER (WHERE skip_reason = 'opted_out')::int AS opted_out,
       count(*) FILTER (WHERE skip_reason = 'no_destination')::int AS no_destination,
       0 AS held_out, -- holds out nobody: the holdout is the goodbye's (daily_inactivity_14d.sql)
       -- With debug logs on, the keys that were already taken (found by
       -- the probe, or by the insert's conflict).
       CASE WHEN @log_duplicates::boolean
            THEN ARRAY(SELECT c.user_id::text || @key_suffix::text FROM chunk c
                        WHERE c.skip_reason IN ('', 'queued_before')
                       EXCEPT SELECT k FROM queued)
            ELSE '{}'::text[] END AS duplicate_keys
  FROM chunk
