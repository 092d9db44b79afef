-- Check no_user_stuck: no user is still where the daily job would have
-- moved them on @grace (a day: the daily job runs once a day) before
-- as-of. Each timer of the state machine's table, with its states, clock
-- and wait, is a parameter (scheduler.DeadlineArgs, the same the daily job
-- passes), and whether its deadline had come is asked, as of @as_of −
-- @grace, of the functions the daily job decides by, so a user the job is
-- rightly waiting on is never reported and one it would have moved is:
--   @inactivity_states, not opted out: engagement_inactivity_due (migration
--     29), silent for @inactivity (from last_activity_at, or created_at
--     when the bot recorded no activity), and not on the UTC day their last
--     goodbye was queued or ended undelivered (a user just moved back by
--     goodbye_undelivered gets their next goodbye the next UTC day), nor
--     before goodbye_retry_at, the wait after goodbyes that failed for good
--     (migration 67), unless they wrote since;
--   @goodbye_states: engagement_goodbye_due (migration 41), the goodbye
--     delivered @goodbye_window ago, in doubt (in_doubt) that long after
--     its last attempt, failed for good or cancelled (by its last attempt),
--     or (no message, or opted out) past goodbye_expires_at;
--   every other timer (@timer_states, @timer_clocks, @timer_waits, one
--     entry per state): engagement_clock (migration 42) + its wait, opted
--     out or not (their timers complete silently).
-- Exempt: users in @inactivity_states with no JID to send a goodbye to
-- (the daily job skips them until they have one), users in
-- @inactivity_states silent past @inactivity whose next goodbye waits
-- after failed ones (goodbye_retry_at after as-of − @grace, 'infinity'
-- until they write: the backoff, which the console's user page explains),
-- and users in
-- @goodbye_states whose goodbye still waits to be delivered (the queue's
-- backlog, quiet hours and outages have their own alerts). The goodbye is
-- found by its key (@goodbye_key_infix: the goodbye kind's), its last
-- attempt in the send ledger. Each example names the user, their state and
-- the time their timer counts from. See verify_goodbye_queued.sql for the
-- statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT s.user_id::text || ' (' || s.state || ' since ' ||
           to_char(CASE WHEN s.state = ANY(@inactivity_states::text[]) THEN coalesce(s.last_activity_at, s.created_at)
                        WHEN s.state = ANY(@goodbye_states::text[]) THEN coalesce(q.sent_at, s.goodbye_sent_at)
                        ELSE t.since END AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"') || ')',
           CASE WHEN s.state = ANY(@inactivity_states::text[])
                THEN route.destination_jid IS NULL
                     OR NOT engagement_inactivity_due(@as_of::timestamptz - @grace::interval, @inactivity::interval,
                                                      s.last_activity_at, s.created_at, s.goodbye_sent_at,
                                                      s.goodbye_expires_at, s.goodbye_retry_at)
                ELSE coalesce(q.status IN ('pending', 'processing') AND NOT p.reengagement_opt_out, false) END
      FROM user_engagement_states s
      JOIN user_profiles p ON p.user_id = s.user_id
     CROSS JOIN LATERAL engagement_route(p.preferred_destination, p.group_jid, p.whatsapp_jid) route
      LEFT JOIN engagement_message_queue q
        ON s.state = ANY(@goodbye_states::text[])
       AND q.idempotency_key = s.user_id::text || @goodbye_key_infix::text || to_char(s.goodbye_sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
      -- The state's earliest other timer, if it has one.
      LEFT JOIN LATERAL (
          SELECT c.since, c.since + t.wait AS due
            FROM unnest(@timer_states::text[], @timer_clocks::text[], @timer_waits::interval[]) AS t(state, clock, wait)
           CROSS JOIN LATERAL (
               SELECT engagement_clock(t.clock, s.last_activity_at, s.created_at, s.remind_at,
                                       s.state_entered_at, s.state_changed_xact_at) AS since
           ) c
           WHERE t.state = s.state
           ORDER BY c.since + t.wait
           LIMIT 1
      ) t ON true
     WHERE CASE
             WHEN s.state = ANY(@inactivity_states::text[])
             THEN NOT p.reengagement_opt_out
                  AND engagement_inactivity_due(@as_of::timestamptz - @grace::interval, @inactivity::interval,
                                                s.last_activity_at, s.created_at, s.goodbye_sent_at, s.goodbye_expires_at)
             WHEN s.state = ANY(@goodbye_states::text[])
             THEN engagement_goodbye_due(@as_of::timestamptz - @grace::interval, @goodbye_window::interval,
                                         p.reengagement_opt_out, s.goodbye_sent_at, s.goodbye_expires_at,
                                         q.status, q.in_doubt, q.sent_at, q.delivered_at,
                                         (SELECT max(l.last_attempt_at) FROM engagement_processed_messages l
                                           WHERE l.message_id = q.id)) IS NOT NULL
                  -- the exempt: still waiting to be delivered
                  OR (q.status IN ('pending', 'processing') AND NOT p.reengagement_opt_out)
             ELSE coalesce(t.due <= @as_of::timestamptz - @grace::interval, false)
           END
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
