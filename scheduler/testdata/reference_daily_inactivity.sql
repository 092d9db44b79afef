-- The daily job's inactivity_14d step as one statement over every user: the
-- yardstick of scheduler/bench_test.go and of the scaling benchmark (bench/).
-- Who is due is migration 29's engagement_inactivity_due, as for the job.
-- Named arguments: as_of, day (YYYY-MM-DD of the as-of instant), run_id.
WITH moved AS (
    UPDATE user_engagement_states s
       SET state = 'goodbye_sent', goodbye_sent_at = @as_of, state_entered_at = @as_of,
           goodbye_expires_at = @as_of::timestamptz + interval '48 hours', updated_at = now()
      FROM user_profiles p, user_engagement_states o
     WHERE p.user_id = s.user_id AND o.user_id = s.user_id
       AND s.state IN ('active', 'help_flow')
       AND engagement_inactivity_due(@as_of::timestamptz, interval '14 days', s.last_activity_at, s.created_at,
                                     s.goodbye_sent_at, s.goodbye_expires_at)
       AND NOT p.reengagement_opt_out
       AND ((p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> '')
            OR coalesce(btrim(p.whatsapp_jid), '') <> '')
 RETURNING s.user_id, o.state AS from_state,
           CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                THEN 'group' ELSE 'individual' END AS destination,
           btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
                THEN p.group_jid ELSE p.whatsapp_jid END) AS destination_jid
), queued AS (
    INSERT INTO engagement_message_queue
           (user_id, message_type, message_key, destination, destination_jid, scheduled_for, idempotency_key,
            period_start, replay_until, job_run_id)
    SELECT user_id, 'goodbye', 'engagement.goodbye.self_select', destination, destination_jid,
           least(@as_of::timestamptz, now()), user_id::text || ':goodbye_sent:' || @day::text,
           -- The key's period, the as-of instant's UTC day, as the job writes it.
           date_trunc('day', @as_of::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
           date_trunc('day', @as_of::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 day',
           @run_id::bigint
      FROM moved
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
), logged AS (
    INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id)
    SELECT user_id, from_state, 'goodbye_sent', 'inactivity_14d', @run_id::bigint FROM moved
)
SELECT count(*) FROM moved
