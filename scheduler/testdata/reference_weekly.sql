-- The weekly job's reviews as one statement over every user: the yardstick
-- of scheduler/bench_test.go and of the scaling benchmark (bench/).
-- Named arguments: as_of, week (YYYY-Www of the as-of instant), run_id.
WITH window_transactions AS (
    SELECT user_id, count(*) AS n FROM transactions
     WHERE created_at > @as_of::timestamptz - interval '7 days' AND created_at <= @as_of
     GROUP BY user_id
)
INSERT INTO engagement_message_queue
       (user_id, message_type, message_key, message_params, destination, destination_jid, scheduled_for, idempotency_key,
        period_start, replay_until, job_run_id)
SELECT s.user_id, 'weekly_review', 'engagement.weekly_review.celebration',
       jsonb_build_object('count', coalesce(w.n, 0)::text),
       CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
            THEN 'group' ELSE 'individual' END,
       btrim(CASE WHEN p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> ''
            THEN p.group_jid ELSE p.whatsapp_jid END),
       least(@as_of::timestamptz, now()), s.user_id::text || ':weekly_review:' || @week::text,
       -- The key's period, the as-of instant's UTC ISO week, as the job writes it.
       date_trunc('week', @as_of::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
       date_trunc('week', @as_of::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '7 days',
       @run_id::bigint
  FROM user_engagement_states s
  JOIN user_profiles p ON p.user_id = s.user_id
  LEFT JOIN window_transactions w ON w.user_id = s.user_id
 WHERE s.state IN ('active', 'help_flow') AND NOT p.reengagement_opt_out
   AND ((p.preferred_destination = 'group' AND coalesce(btrim(p.group_jid), '') <> '')
        OR coalesce(btrim(p.whatsapp_jid), '') <> '')
   AND (w.user_id IS NOT NULL
        OR (s.last_activity_at > @as_of::timestamptz - interval '7 days' AND s.last_activity_at <= @as_of))
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
