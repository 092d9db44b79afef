-- Check no_user_stuck: no user is still where the daily job would have
-- moved them on @grace (a day: the daily job runs once a day) before
-- as-of. Whether a user's deadline had come is asked, as of @as_of −
-- @grace, of the functions the daily job decides by (migration 29), with
-- the same parameters (scheduler.DeadlineArgs), so a user the job is
-- rightly waiting on is never reported and one it would have moved is:
--   @inactivity_states (active, help_flow), not opted out:
--     engagement_inactivity_due, silent 14 days (@inactivity; from
--     last_activity_at, or created_at when the bot recorded no activity),
--     and not on the UTC day their last goodbye was queued or ended
--     undelivered (a user just moved back by goodbye_undelivered gets their
--     next goodbye the next UTC day);
--   @goodbye_states (goodbye_sent): engagement_goodbye_due, the goodbye
--     delivered 48 h (@goodbye_window) ago, in doubt (its error starting
--     with @unknown_prefix) 48 h after its last attempt, failed for good or
--     cancelled (by its last attempt), or (no message, or opted out) past
--     goodbye_expires_at (goodbye_sent_at + 48 h without it);
--   @reminder_states (remind_later): engagement_reminder_due, remind_at.
-- Exempt: active and help_flow users with no JID to send a goodbye to (the
-- daily job skips them until they have one), and goodbye_sent users whose
-- goodbye still waits to be delivered (the queue's backlog, quiet hours and
-- outages have their own alerts). The goodbye is found by its key
-- (@goodbye_key_infix: the goodbye kind's), its last attempt in the send
-- ledger. See verify_goodbye_queued.sql for the statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT s.user_id::text || ' (' || s.state || ' since ' ||
           to_char(CASE WHEN s.state = ANY(@goodbye_states::text[]) THEN coalesce(q.sent_at, s.goodbye_sent_at)
                        WHEN s.state = ANY(@reminder_states::text[]) THEN s.remind_at
                        ELSE coalesce(s.last_activity_at, s.created_at) END AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"') || ')',
           CASE WHEN s.state = ANY(@inactivity_states::text[])
                THEN coalesce(btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                                         THEN p.group_jid ELSE p.whatsapp_jid END), '') = ''
                ELSE coalesce(q.status IN ('pending', 'processing') AND NOT p.reengagement_opt_out, false) END
      FROM user_engagement_states s
      JOIN user_profiles p ON p.user_id = s.user_id
      LEFT JOIN engagement_message_queue q
        ON s.state = ANY(@goodbye_states::text[])
       AND q.idempotency_key = s.user_id::text || @goodbye_key_infix::text || to_char(s.goodbye_sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
     WHERE CASE
             WHEN s.state = ANY(@inactivity_states::text[])
             THEN NOT p.reengagement_opt_out
                  AND engagement_inactivity_due(@as_of::timestamptz - @grace::interval, @inactivity::interval,
                                                s.last_activity_at, s.created_at, s.goodbye_sent_at, s.goodbye_expires_at)
             WHEN s.state = ANY(@goodbye_states::text[])
             THEN engagement_goodbye_due(@as_of::timestamptz - @grace::interval, @goodbye_window::interval, @unknown_prefix::text,
                                         p.reengagement_opt_out, s.goodbye_sent_at, s.goodbye_expires_at,
                                         q.status, q.error_message, q.sent_at,
                                         (SELECT max(l.last_attempt_at) FROM engagement_processed_messages l
                                           WHERE l.message_id = q.id)) IS NOT NULL
                  -- the exempt: still waiting to be delivered
                  OR (q.status IN ('pending', 'processing') AND NOT p.reengagement_opt_out)
             WHEN s.state = ANY(@reminder_states::text[])
             THEN engagement_reminder_due(@as_of::timestamptz - @grace::interval, s.remind_at)
             ELSE false
           END
)
SELECT count(*) FILTER (WHERE NOT exempt),
       count(*) FILTER (WHERE exempt),
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}')
  FROM found
