-- Each run's counters: the summary the job writes when it finishes
-- (scheduler.Summary as JSON; docs/reference/formats.md), from what the
-- run did in the log and the queue. Daily: a user moved counts as
-- processed and succeeded in its step; every inactivity_14d queued a
-- goodbye, every reminder_due since @reminders_since a reminder (the users
-- it moved without one count as duplicates); opted-out users the
-- inactivity step found silent are skipped (opted_out). A partial run
-- also lists 1 to 3 users that failed (a statement timeout) and were left
-- for the next day. A failed run stopped before its first batch
-- committed: zero counters, no steps. Weekly: every review queued counts;
-- opted-out users active in the week are skipped.
WITH moves AS MATERIALIZED (
    SELECT job_run_id,
           count(*) FILTER (WHERE trigger = 'inactivity_14d') AS inactive,
           count(*) FILTER (WHERE trigger IN ('goodbye_timeout', 'goodbye_undelivered')) AS timed_out,
           count(*) FILTER (WHERE trigger = 'reminder_due') AS reminded
      FROM engagement_state_transitions
     WHERE job_run_id IS NOT NULL
     GROUP BY job_run_id
), queued AS MATERIALIZED (
    SELECT job_run_id,
           count(*) FILTER (WHERE message_type = @reminder_type::text) AS reminders,
           count(*) FILTER (WHERE message_type = @review_type::text) AS reviews
      FROM engagement_message_queue
     WHERE job_run_id IS NOT NULL AND message_type <> @goodbye_type::text
     GROUP BY job_run_id
), opted AS MATERIALIZED (
    SELECT s.last_activity_at
      FROM user_engagement_states s
      JOIN user_profiles p ON p.user_id = s.user_id
     WHERE p.reengagement_opt_out AND s.state = 'active'
), c AS (
    SELECT r.id, r.job, r.as_of, r.status,
           extract(epoch FROM r.finished_at - r.started_at)::bigint * 1000
           + (pg_temp.cd_u(r.id, 70) * 1000)::bigint AS duration_ms,
           coalesce(mv.inactive, 0) AS inactive, coalesce(mv.timed_out, 0) AS timed_out, coalesce(mv.reminded, 0) AS reminded,
           coalesce(qu.reminders, 0) AS reminders, coalesce(qu.reviews, 0) AS reviews,
           r.as_of >= @reminders_since::timestamptz AS send_reminder,
           CASE WHEN r.status = 'partial' THEN 1 + floor(pg_temp.cd_u(r.id, 71) * 3)::int ELSE 0 END AS failed,
           CASE WHEN r.job = 'engagement-daily'
                THEN (SELECT count(*) FROM opted o WHERE o.last_activity_at < r.as_of - interval '14 days')
                ELSE (SELECT count(*) FROM opted o WHERE o.last_activity_at > r.as_of - interval '7 days'
                                                     AND o.last_activity_at <= r.as_of) END AS opted_out
      FROM engagement_job_runs r
      LEFT JOIN moves mv ON mv.job_run_id = r.id
      LEFT JOIN queued qu ON qu.job_run_id = r.id
), s AS (
    SELECT c.*,
           jsonb_build_object('processed', inactive + failed, 'succeeded', inactive, 'failed', failed,
                              'skipped', opted_out, 'queued', inactive, 'duplicates', 0,
                              'skip_reasons', CASE WHEN opted_out > 0 THEN jsonb_build_object('opted_out', opted_out) END) AS s_inactive,
           jsonb_build_object('processed', timed_out, 'succeeded', timed_out, 'failed', 0, 'skipped', 0,
                              'queued', 0, 'duplicates', 0) AS s_timeout,
           jsonb_build_object('processed', reminded, 'succeeded', reminded, 'failed', 0, 'skipped', 0,
                              'queued', reminders, 'duplicates', CASE WHEN send_reminder THEN reminded - reminders ELSE 0 END) AS s_reminder,
           jsonb_build_object('processed', reviews, 'succeeded', reviews, 'failed', 0, 'skipped', opted_out,
                              'queued', reviews, 'duplicates', 0,
                              'skip_reasons', CASE WHEN opted_out > 0 THEN jsonb_build_object('opted_out', opted_out) END) AS s_review,
           coalesce((SELECT jsonb_agg(jsonb_build_object(
                                'user_id', md5('consoledata:' || floor(pg_temp.cd_u(c.id * 8 + n, 72) * @users::bigint)::bigint)::uuid::text,
                                'step', 'inactivity_14d',
                                'error', 'ERROR: canceling statement due to statement timeout (SQLSTATE 57014)'))
                       FROM generate_series(1, c.failed) AS n), '[]'::jsonb) AS errors
      FROM c
)
UPDATE engagement_job_runs r
   SET counters = jsonb_strip_nulls(
       jsonb_build_object('job', s.job, 'as_of', to_char(s.as_of, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'dry_run', false, 'run_id', s.id,
                          'duration_ms', s.duration_ms, 'errors', s.errors)
       || CASE WHEN s.status = 'failed' THEN
                   jsonb_build_object('processed', 0, 'succeeded', 0, 'failed', 0, 'skipped', 0, 'queued', 0, 'duplicates', 0,
                                      'steps', '{}'::jsonb)
               WHEN s.job = 'engagement-daily' THEN
                   jsonb_build_object('processed', s.inactive + s.failed + s.timed_out + s.reminded,
                                      'succeeded', s.inactive + s.timed_out + s.reminded, 'failed', s.failed,
                                      'skipped', s.opted_out, 'queued', s.inactive + s.reminders,
                                      'duplicates', CASE WHEN s.send_reminder THEN s.reminded - s.reminders ELSE 0 END,
                                      'skip_reasons', CASE WHEN s.opted_out > 0 THEN jsonb_build_object('opted_out', s.opted_out) END,
                                      'steps', jsonb_build_object('inactivity_14d', s.s_inactive, 'goodbye_timeout', s.s_timeout,
                                                                  'reminder_due', s.s_reminder),
                                      'messages', jsonb_build_object(@goodbye_type::text, jsonb_build_object('queued', s.inactive, 'duplicates', 0))
                                                  || CASE WHEN s.send_reminder
                                                          THEN jsonb_build_object(@reminder_type::text, jsonb_build_object(
                                                                   'queued', s.reminders, 'duplicates', s.reminded - s.reminders))
                                                          ELSE '{}'::jsonb END)
               ELSE
                   jsonb_build_object('iso_week', to_char(s.as_of, 'IYYY-"W"IW'),
                                      'processed', s.reviews, 'succeeded', s.reviews, 'failed', 0, 'skipped', s.opted_out,
                                      'queued', s.reviews, 'duplicates', 0,
                                      'skip_reasons', CASE WHEN s.opted_out > 0 THEN jsonb_build_object('opted_out', s.opted_out) END,
                                      'steps', jsonb_build_object('weekly_review', s.s_review),
                                      'messages', jsonb_build_object(@review_type::text, jsonb_build_object('queued', s.reviews, 'duplicates', 0)))
          END)
  FROM s
 WHERE r.id = s.id
