-- Step goodbye_timeout: goodbye_sent -goodbye_timeout-> dormant.
--
-- Moves the users of one chunk of user_engagement_states (the rows whose
-- ctid lies in [@first, @end)) who are in @from_state and whose goodbye is
-- over at @as_of, by what became of the goodbye message (found by its key,
-- the user id, @key_infix and the UTC day of goodbye_sent_at), as
-- engagement_goodbye_due (migration 29, the definition verify's
-- no_user_stuck uses too) decides it:
--
--   delivered ('sent') @goodbye_window (48 h) ago, by its delivery
--     receipt (delivered_at, migration 49) or, without one, its
--     acceptance (sent_at): the user had their 48 hours to answer
--                                        → @to_state, logged @trigger;
--   in doubt ('failed' with in_doubt, migration 41: it may have
--     arrived), its last attempt (the send ledger's last_attempt_at)
--     48 h ago                           → the same;
--   failed for good (a late failure WhatsApp reported after accepting it
--     included) or cancelled: the user never got it, and is not timed
--     out on it, opted out or not        → @undelivered_to_state, logged
--                                           @undelivered_trigger (active:
--                                           a later goodbye is their
--                                           first), and goodbye_expires_at
--                                           = @as_of, the goodbye is over:
--                                           a re-run the same day changes
--                                           nothing;
--     and the next goodbye waits by the failure (migration 67): a
--     goodbye that failed for good, with any code but
--     @marketing_stopped_code (131050: the user stopped marketing
--     messages, and is opted out), is one more in goodbye_failures (the
--     goodbyes in a row that failed since the user last wrote), and
--     goodbye_retry_at is its goodbye_sent_at plus the n-th wait of its
--     code's schedule: @ecosystem_limit_backoff for
--     @ecosystem_limit_code (131049, Meta's per-user marketing limit),
--     @undeliverable_backoff for any other code or none; 'infinity' past
--     the schedule's end (no goodbye until the user writes). A goodbye
--     cancelled for one of @until_user_writes (reachout_window,
--     us_marketing_blocked: it would be cancelled again every day) counts
--     nothing and waits for the user to write ('infinity'). Any other
--     cancelled goodbye or a 131050 counts nothing and sets no wait: the
--     next goodbye comes the next UTC day, as before;
--   pending or in flight (deferred by quiet hours, an outage, a backlog,
--     or queued by a late re-run): not yet;
--   no such message (the bot set the state, or cleanup deleted it): the
--     old rule, goodbye_expires_at has come, or goodbye_sent_at is 48 h
--     old without it.
--
-- An opted-out user's goodbye is judged by its outcome like anyone's; one
-- still pending or in flight (claim cancels it) completes silently on the
-- old rule: they are never messaged, and never left in goodbye_sent. A
-- delivered goodbye (or one in doubt) ends the run of failures:
-- goodbye_failures and goodbye_retry_at are cleared. Each move is logged (run @run_id) in the
-- same statement. @from_state, @to_state, @trigger and the undelivered
-- transition come from the state machine's table (statemachine.Transitions);
-- step_test.go runs the step and checks its outcome against the table.
-- Nothing is queued. Only the run's shard (@shard_index of @shard_count)
-- is seen: a @shard_count of 1 is every user.
--
-- A dry run (@dry_run: engagement-daily --dry-run, the console's
-- forecast) is this statement over the whole table, with @first and @end
-- spanning every row: it locks, moves and logs nobody (locked is empty, so
-- moved and logged are), and counts instead every user the move would
-- take, every row taken to be free.
--
-- Returns the chunk's counters: candidates, moved, queued (always 0),
-- locked (rows the bot held: skipped, a later run moves them), opted out
-- (always 0: their timers complete), no destination (always 0); in a dry
-- run, what the move would do.
-- nullable: @run_id
WITH chunk AS MATERIALIZED (
    -- OFFSET 0 keeps the profile and the goodbye primary-key and unique-key
    -- probes per user. The send ledger is read only for a goodbye that
    -- failed or was cancelled (the function reads its argument in that
    -- branch alone).
    SELECT s.user_id, v.verdict, g.to_state, g.trigger, b.counts,
           CASE WHEN b.counts THEN coalesce(s.goodbye_failures, 0) + 1 ELSE s.goodbye_failures END AS failures,
           CASE WHEN v.verdict = 'undelivered' AND v.status = 'cancelled'
                     AND v.cancel_reason = ANY (@until_user_writes::text[]) THEN 'infinity'::timestamptz
                WHEN NOT b.counts THEN NULL
                WHEN b.wait IS NULL THEN 'infinity'::timestamptz
                ELSE coalesce(s.goodbye_sent_at, @as_of::timestamptz) + b.wait END AS retry_at
      FROM user_engagement_states s
      CROSS JOIN LATERAL engagement_send_route(s.user_id) p
      CROSS JOIN LATERAL (
          SELECT engagement_goodbye_due(@as_of::timestamptz, @goodbye_window::interval,
                                        p.opted_out, s.goodbye_sent_at, s.goodbye_expires_at,
                                        q.status, q.in_doubt, q.sent_at, q.delivered_at,
                                        (SELECT max(l.last_attempt_at) FROM engagement_processed_messages l
                                          WHERE l.message_id = q.id)) AS verdict,
                 q.status, q.cancel_reason, engagement_failure_code(q.error_message) AS code
            FROM (SELECT) AS one
            LEFT JOIN engagement_message_queue q
              ON q.idempotency_key = s.user_id::text || @key_infix::text
                                     || to_char(s.goodbye_sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
          OFFSET 0
      ) v
      CROSS JOIN LATERAL (
          SELECT CASE v.verdict WHEN 'timed_out' THEN @to_state::text ELSE @undelivered_to_state::text END AS to_state,
                 CASE v.verdict WHEN 'timed_out' THEN @trigger::text ELSE @undelivered_trigger::text END AS trigger
      ) g
      CROSS JOIN LATERAL (
          -- Whether the failure counts, and the wait its code's schedule
          -- gives the n-th failure in a row (NULL past its end).
          SELECT c.counts,
                 CASE WHEN c.counts
                      THEN (CASE WHEN v.code = @ecosystem_limit_code::text THEN @ecosystem_limit_backoff::interval[]
                                 ELSE @undeliverable_backoff::interval[] END)[coalesce(s.goodbye_failures, 0) + 1]
                 END AS wait
            FROM (SELECT v.verdict = 'undelivered' AND v.status = 'failed'
                         AND v.code IS DISTINCT FROM @marketing_stopped_code::text AS counts) c
      ) b
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state = @from_state
       AND v.verdict IS NOT NULL
       AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
), locked AS MATERIALIZED (
    -- Rows the bot holds are skipped rather than waited for, and counted.
    SELECT s.user_id
      FROM user_engagement_states s
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state = @from_state
       AND s.user_id IN (SELECT user_id FROM chunk)
       AND NOT @dry_run::boolean
       FOR NO KEY UPDATE SKIP LOCKED
), moved AS (
    -- Re-checks the state: a user the bot moved in between is not moved.
    UPDATE user_engagement_states s
       SET state = c.to_state, updated_at = now(), state_entered_at = @as_of,
           goodbye_expires_at = CASE WHEN c.verdict = 'undelivered' THEN @as_of::timestamptz
                                     ELSE s.goodbye_expires_at END,
           goodbye_failures = CASE WHEN c.verdict = 'timed_out' THEN NULL ELSE c.failures END,
           goodbye_retry_at = c.retry_at
      FROM chunk c
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.user_id IN (SELECT user_id FROM locked) AND c.user_id = s.user_id
       AND s.state = @from_state
 RETURNING s.user_id, c.to_state, c.trigger
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, @from_state, to_state, trigger, @run_id::bigint FROM moved
)
SELECT count(*)::int AS candidates,
       CASE WHEN @dry_run::boolean THEN count(*) -- would move every one
            ELSE (SELECT count(*) FROM moved) END::int AS moved,
       0 AS queued,
       CASE WHEN @dry_run::boolean THEN 0 -- no row is tried
            ELSE count(*) - (SELECT count(*) FROM locked) END::int AS locked,
       0 AS opted_out,
       0 AS no_destination,
       0 AS held_out, -- holds out nobody
       '{}'::text[] AS duplicate_keys -- queues nothing: no duplicate keys to name
  FROM chunk
