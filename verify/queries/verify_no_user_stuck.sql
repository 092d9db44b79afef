-- Check no_user_stuck: no user is in a state past its documented deadline
-- by more than @grace (a day: the daily job runs once a day), where the
-- daily job would have moved them on:
--   active or help_flow, not opted out, silent since before as-of − 14 days
--     (@inactivity) − grace (last_activity_at, or created_at when the bot
--     recorded no activity): should have had a goodbye;
--   goodbye_sent with the goodbye delivered (or in doubt) more than 48 h
--     (@goodbye_window) + grace ago, failed or cancelled with
--     goodbye_sent_at as old, or (no message, or opted out) past
--     goodbye_expires_at (goodbye_sent_at + 48 h without it) + grace;
--   remind_later past remind_at + grace.
-- Exempt: active and help_flow users with no JID to send a goodbye to (the
-- daily job skips them until they have one), and goodbye_sent users whose
-- goodbye still waits to be delivered (the queue's backlog, quiet hours and
-- outages have their own alerts). The goodbye is found by its key
-- (@goodbye_key_infix: the goodbye kind's). See verify_goodbye_queued.sql
-- for the statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT s.user_id::text || ' (' || s.state || ' since ' ||
           to_char(CASE s.state WHEN 'goodbye_sent' THEN coalesce(q.sent_at, s.goodbye_sent_at)
                                WHEN 'remind_later' THEN s.remind_at
                                ELSE coalesce(s.last_activity_at, s.created_at) END AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"') || ')',
           CASE WHEN s.state IN ('active', 'help_flow')
                THEN coalesce(btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                                         THEN p.group_jid ELSE p.whatsapp_jid END), '') = ''
                ELSE coalesce(q.status IN ('pending', 'processing') AND NOT p.reengagement_opt_out, false) END
      FROM user_engagement_states s
      JOIN user_profiles p ON p.user_id = s.user_id
      LEFT JOIN engagement_message_queue q
        ON s.state = 'goodbye_sent'
       AND q.idempotency_key = s.user_id::text || @goodbye_key_infix::text || to_char(s.goodbye_sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
     WHERE CASE s.state
             WHEN 'active' THEN NOT p.reengagement_opt_out
                                AND coalesce(s.last_activity_at, s.created_at) < @as_of::timestamptz - @inactivity::interval - @grace::interval
             WHEN 'help_flow' THEN NOT p.reengagement_opt_out
                                AND coalesce(s.last_activity_at, s.created_at) < @as_of::timestamptz - @inactivity::interval - @grace::interval
             WHEN 'goodbye_sent' THEN
                  CASE WHEN p.reengagement_opt_out OR q.status IS NULL
                       THEN coalesce(s.goodbye_expires_at, s.goodbye_sent_at + @goodbye_window::interval)
                            < @as_of::timestamptz - @grace::interval
                       WHEN q.status = 'sent'
                       THEN q.sent_at < @as_of::timestamptz - @goodbye_window::interval - @grace::interval
                       WHEN q.status IN ('pending', 'processing') THEN true
                       ELSE s.goodbye_sent_at < @as_of::timestamptz - @goodbye_window::interval - @grace::interval
                  END
             WHEN 'remind_later' THEN s.remind_at < @as_of::timestamptz - @grace::interval
             ELSE false
           END
)
SELECT count(*) FILTER (WHERE NOT exempt),
       count(*) FILTER (WHERE exempt),
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}')
  FROM found
