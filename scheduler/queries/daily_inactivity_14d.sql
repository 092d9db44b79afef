-- Step inactivity_14d: active -inactivity_14d-> goodbye_sent, queueing the goodbye.
--
-- Moves the users of one chunk of user_engagement_states (the rows whose
-- ctid lies in [@first, @end)) who are in any of @from_states (@from_state,
-- and every other state the table moves to the same state on the same
-- trigger: a help_flow user who went silent falls back into the inactivity
-- path) and whose silence is due at @as_of by engagement_inactivity_due
-- (migration 29, the definition verify's no_user_stuck uses too): silent
-- for @inactivity (14 days; a user the bot recorded no activity for,
-- last_activity_at NULL, is silent since its state row's created_at), and
-- not on the UTC day their last goodbye was queued or ended undelivered
-- (one goodbye a day: a re-run the same day after goodbye_undelivered
-- changes nothing), and not before goodbye_retry_at, the wait that
-- goodbyes that failed for good set (migration 67: 131049 2, 4, 8, 16
-- days, any other code 7, 14, 28 days, then none), unless the user wrote
-- since their last goodbye. Each gets state @to_state, state_entered_at and
-- goodbye_sent_at @as_of, goodbye_expires_at @goodbye_expires_at (as-of +
-- 48 h), goodbye_retry_at cleared, and goodbye_failures cleared when they
-- wrote since their last goodbye (a new run of failures starts); queues
-- each one's goodbye under the key user_id || @key_suffix
-- (':goodbye_sent:YYYY-MM-DD'), covering [@period_start, @replay_until);
-- and logs each move (from the user's state, @trigger, run @run_id) — all
-- in one statement, so a
-- user's state, message and log row commit together or not at all.
-- @from_state, @to_state and @trigger come from the state machine's table
-- (statemachine.Transitions); step_test.go runs the step and
-- checks its outcome against the table.
--
-- The holdout (issue 45): a user the goodbye would reach whose bucket,
-- engagement_holdout_bucket(@holdout_salt, user_id) (migration 55: 0 to
-- 9999, from the user id alone), is below @holdout_basis_points (the
-- holdout percent times 100) is held out: moved, logged with holdout =
-- true, their 48 hours from @as_of like everyone else's, and nothing is
-- queued for them. 0 basis points holds out nobody. The move records it on
-- the user's row too (goodbye_holdout, migration 69), where every other
-- door reads it: a goodbye queued by hand for that cycle is refused.
--
-- Copy variants (migration 57): with @variant_names (and their catalog
-- keys, @variant_keys, in the same order) a treated user's goodbye is the
-- variant at engagement_holdout_bucket('variant:' || @message_type,
-- user_id) modulo their number (a hash of the user id apart from the
-- holdout's), its key as message_key and its name recorded on the message
-- and on the log row; without, the kind's one text (@message_key).
--
-- The user's hour (issue 61, migration 85): with @best_hour_basis_points
-- 0 or more (engagement-daily --best-hour, --best-hour-percent), a user
-- whose bucket engagement_holdout_bucket(@best_hour_salt, user_id) is below
-- it is in the best-hour arm, the others in the run-time arm; the arm is
-- logged on the move (timing 'best_hour' or 'run_time', whether or not the
-- user's hour is known: the funnel compares the arms as assigned), and
-- NULL for a held-out user (no goodbye, no timing) and when the run uses
-- neither flag (@best_hour_basis_points -1). A best-hour user with at least
-- 3 messages in the 90 days before @as_of (recent_messages[3]) gets their
-- goodbye scheduled in the hour of day they wrote most in (message_hour:
-- the largest of message_hours, the earlier hour on a tie), counted in
-- UTC (migration 87) and turned to their clock here: the first start of an
-- hour of their zone (their profile's timezone as engagement_zone reads
-- it, else UTC) within the next time that UTC hour starts after @as_of,
-- or @as_of itself when the run is inside that UTC hour; for a zone a
-- whole number of hours off UTC, the UTC hour's own start. Only if that is
-- within 24 hours and outside the quiet hours
-- (@quiet_start to @quiet_end in their zone, else @timezone: the zone the
-- claim holds them in). Every other goodbye is due at the run's time.
--
-- Opted-out users are never touched; users the goodbye could not reach
-- (engagement_route, migration 40, finds them no destination) are left for
-- later. Only the run's shard (@shard_index of @shard_count) is seen:
-- a @shard_count of 1 is every user, and the planner drops the hash.
--
-- A dry run (@dry_run: engagement-daily --dry-run, the console's
-- forecast) is this statement over the whole table, with @first and @end
-- spanning every row: it locks, moves, queues and logs nobody (locked is
-- empty, so moved, queued and logged are), and counts instead the users
-- the move would take (would), every row taken to be free.
--
-- Returns the chunk's counters: candidates, moved, queued, locked (rows
-- the bot held: skipped, a later run moves them), opted out, no
-- destination, held out; in a dry run, what the move would do.
-- nullable: @run_id, @quiet_start, @quiet_end
WITH chunk AS MATERIALIZED (
    -- The step's users among the chunk's rows, with their profile. OFFSET 0
    -- keeps the profile a primary-key probe per user: joined plainly, the
    -- planner hashed every profile for every chunk.
    SELECT s.user_id, s.state, p.skip_reason, p.destination, p.destination_jid,
           p.skip_reason = '' AND engagement_holdout_bucket(@holdout_salt::text, s.user_id)
                                  < @holdout_basis_points::int AS held_out,
           CASE WHEN cardinality(@variant_names::text[]) > 0
                THEN 1 + engagement_holdout_bucket('variant:' || @message_type::text, s.user_id)
                         % cardinality(@variant_names::text[]) END AS variant,
           a.best_hour_arm, b.best_at
      FROM user_engagement_states s
      CROSS JOIN LATERAL engagement_send_route(s.user_id) p
      CROSS JOIN LATERAL (
          -- Everyone at 100 % (--best-hour): no hash to compute.
          SELECT CASE WHEN @best_hour_basis_points::int >= 10000 THEN true
                      WHEN @best_hour_basis_points::int >= 0
                      THEN engagement_holdout_bucket(@best_hour_salt::text, s.user_id) < @best_hour_basis_points::int
                 END AS best_hour_arm
      ) a
      LEFT JOIN LATERAL (
          -- The user's hour, for the best-hour arm's users it is known of.
          -- Each OFFSET 0 keeps a subquery whole, computed once per user:
          -- pulled up, its expressions were copied into every use.
          SELECT CASE WHEN t.at <= @as_of::timestamptz + interval '24 hours'
                       AND engagement_quiet_until(t.at, coalesce(z.zone, @timezone::text),
                                                  @quiet_start::interval, @quiet_end::interval) IS NULL
                      THEN t.at END AS best_at
            FROM (
                -- The zone as the claim reads it: a name the table holds as
                -- it is (one probe), else engagement_zone's.
                SELECT CASE WHEN p.timezone IS NULL THEN NULL
                            WHEN EXISTS (SELECT FROM engagement_time_zones tz WHERE tz.name = p.timezone) THEN p.timezone
                            ELSE engagement_zone(p.timezone) END AS zone,
                       s.message_hour::int AS hour
                OFFSET 0
            ) z
           CROSS JOIN LATERAL (
               -- The next start of the UTC hour (migration 87: the hours are
               -- counted in UTC), or the as-of itself inside it.
               SELECT CASE WHEN extract(hour FROM @as_of::timestamptz AT TIME ZONE 'UTC') = z.hour
                           THEN @as_of::timestamptz
                           ELSE (date_trunc('day', @as_of::timestamptz AT TIME ZONE 'UTC') + make_interval(hours => z.hour)
                                 + CASE WHEN extract(hour FROM @as_of::timestamptz AT TIME ZONE 'UTC') > z.hour
                                        THEN interval '1 day' ELSE interval '0' END) AT TIME ZONE 'UTC'
                      END AS utc_at
               OFFSET 0
           ) u
           CROSS JOIN LATERAL (
               -- Turned to the user's clock: the first start of one of its
               -- hours within that UTC hour, the UTC hour's own start in a
               -- zone a whole number of hours off UTC (20:00 in Kolkata,
               -- +05:30, for 14:00 UTC).
               SELECT CASE WHEN u.utc_at = @as_of::timestamptz OR date_trunc('hour', l.local_at) = l.local_at
                           THEN u.utc_at
                           ELSE (date_trunc('hour', l.local_at) + interval '1 hour') AT TIME ZONE coalesce(z.zone, 'UTC')
                      END AS at
                 FROM (SELECT u.utc_at AT TIME ZONE coalesce(z.zone, 'UTC') AS local_at) l
               OFFSET 0
           ) t
           WHERE a.best_hour_arm
             AND s.recent_messages[3] >= @as_of::timestamptz - interval '90 days'
          OFFSET 0
      ) b ON true
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state = ANY(@from_states::text[])
       AND engagement_inactivity_due(@as_of::timestamptz, @inactivity::interval, s.last_activity_at, s.created_at,
                                     s.goodbye_sent_at, s.goodbye_expires_at, s.goodbye_retry_at)
       AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
), locked AS MATERIALIZED (
    -- The bot holds rows while it handles a user's message: skip them
    -- rather than wait, and count them.
    SELECT s.user_id
      FROM user_engagement_states s
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.state = ANY(@from_states::text[])
       AND engagement_inactivity_due(@as_of::timestamptz, @inactivity::interval, s.last_activity_at, s.created_at,
                                     s.goodbye_sent_at, s.goodbye_expires_at, s.goodbye_retry_at)
       AND s.user_id IN (SELECT user_id FROM chunk WHERE skip_reason = '')
       AND NOT @dry_run::boolean
       FOR NO KEY UPDATE SKIP LOCKED
), moved AS (
    -- Re-checks what chunk checked: a user changed in between (by the bot,
    -- or another run) is not moved. The profile is not locked: the state
    -- row is the one the move changes.
    UPDATE user_engagement_states s
       SET state = @to_state, updated_at = now(), state_entered_at = @as_of,
           goodbye_sent_at = @as_of, goodbye_expires_at = @goodbye_expires_at, goodbye_retry_at = NULL,
           goodbye_holdout = c.held_out,
           goodbye_failures = CASE WHEN coalesce(s.last_activity_at, s.created_at) > s.goodbye_sent_at
                                   THEN NULL ELSE s.goodbye_failures END
      FROM chunk c
     WHERE s.ctid >= @first::tid AND s.ctid < @end::tid
       AND s.user_id IN (SELECT user_id FROM locked) AND c.user_id = s.user_id
       AND s.state = ANY(@from_states::text[])
       AND engagement_inactivity_due(@as_of::timestamptz, @inactivity::interval, s.last_activity_at, s.created_at,
                                     s.goodbye_sent_at, s.goodbye_expires_at, s.goodbye_retry_at)
       AND s.state = c.state
 RETURNING s.user_id, c.state AS from_state, c.destination, c.destination_jid, c.held_out,
           c.best_hour_arm, c.best_at,
           CASE WHEN NOT c.held_out THEN (@variant_names::text[])[c.variant] END AS variant,
           coalesce((@variant_keys::text[])[c.variant], @message_key::text) AS message_key
), queued AS (
    -- ON CONFLICT DO NOTHING: a key already taken (this day's goodbye
    -- exists) queues nothing and counts as a duplicate. It does not lock
    -- the row it conflicts with, so a goodbye the bot holds is no wait.
    -- Held-out users get nothing.
    INSERT INTO engagement_message_queue
           (user_id, message_type, message_key, destination, destination_jid,
            scheduled_for, idempotency_key, period_start, replay_until, job_run_id, variant)
    SELECT user_id, @message_type, message_key, destination, destination_jid,
           coalesce(best_at, least(@as_of::timestamptz, now())), user_id::text || @key_suffix::text,
           @period_start::timestamptz, @replay_until::timestamptz, @run_id::bigint, variant
      FROM moved
     WHERE NOT held_out
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING idempotency_key AS k
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id, holdout, variant, timing)
    SELECT user_id, from_state, @to_state, @trigger, @run_id::bigint, held_out, variant,
           CASE WHEN held_out THEN NULL WHEN best_hour_arm THEN 'best_hour' WHEN NOT best_hour_arm THEN 'run_time' END
      FROM moved
), would AS MATERIALIZED (
    -- A dry run's users: those the move would take, and whether the
    -- goodbye it would queue for each is new (its key not taken yet).
    SELECT c.held_out,
           NOT c.held_out AND NOT EXISTS (SELECT FROM engagement_message_queue q
                                           WHERE q.idempotency_key = c.user_id::text || @key_suffix::text) AS queues
      FROM chunk c
     WHERE @dry_run::boolean AND c.skip_reason = ''
)
SELECT count(*)::int AS candidates,
       ((SELECT count(*) FROM moved) + (SELECT count(*) FROM would))::int AS moved,
       ((SELECT count(*) FROM queued) + (SELECT count(*) FROM would WHERE queues))::int AS queued,
       CASE WHEN @dry_run::boolean THEN 0 -- no row is tried
            ELSE count(*) FILTER (WHERE skip_reason = '') - (SELECT count(*) FROM locked) END::int AS locked,
       count(*) FILTER (WHERE skip_reason = 'opted_out')::int AS opted_out,
       count(*) FILTER (WHERE skip_reason = 'no_destination')::int AS no_destination,
       ((SELECT count(*) FROM moved WHERE held_out) + (SELECT count(*) FROM would WHERE held_out))::int AS held_out,
       -- With debug logs on, the keys that were already taken, so the job
       -- can say when each was first queued.
       CASE WHEN @log_duplicates::boolean
            THEN ARRAY(SELECT m.user_id::text || @key_suffix::text FROM moved m WHERE NOT m.held_out
                       EXCEPT SELECT k FROM queued)
            ELSE '{}'::text[] END AS duplicate_keys
  FROM chunk
