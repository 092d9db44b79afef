-- The transition log, in the order the moves happened, so ids grow with
-- created_at as they do in a live log. The daily job's moves point to the
-- run that made them (@daily_ids: the run doing the work of each day from
-- @first_day); the bot's have none. logged_at is created_at: the log's
-- write time for verify's log_matches_state (see 05_states.sql).
INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, job_run_id, created_at, logged_at)
SELECT u.user_id,
       (ARRAY['active', 'goodbye_sent', 'help_flow', 'remind_later', 'dormant'])[u.fr[k]],
       (ARRAY['active', 'goodbye_sent', 'help_flow', 'remind_later', 'dormant'])[coalesce(u.fr[k + 1], u.state)],
       (ARRAY['inactivity_14d', 'goodbye_timeout', 'goodbye_undelivered', 'reminder_due', 'user_message',
              'goodbye_answer_help', 'goodbye_answer_remind_later', 'goodbye_answer_dormant'])[u.tr[k]],
       CASE WHEN u.tr[k] <= 4 THEN (@daily_ids::bigint[])[pg_temp.cd_day(u.ts[k]) - @first_daynum::bigint + 1] END,
       u.ts[k], u.ts[k]
  FROM consoledata.users u
 CROSS JOIN LATERAL generate_subscripts(u.tr, 1) AS k
 ORDER BY u.ts[k]
