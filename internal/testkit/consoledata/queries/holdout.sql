-- HoldOut (holdout.go): about @basis_points / 100 % of the history's
-- goodbyes held out, as engagement-daily --holdout-percent with @salt
-- would have held them out (the users whose engagement_holdout_bucket is
-- below @basis_points): their log rows say holdout and their goodbyes
-- (of the run's UTC day) leave the queue; every other goodbye gets a copy
-- variant, a or b, by the daily job's own hash, on its log row and its
-- message. For the console's page-speed benchmark and its screenshots at
-- a realistic size: the history's answers and undelivered goodbyes of
-- held-out users stay as the generator made them.
WITH held AS (
    UPDATE engagement_state_transitions t
       SET holdout = true
     WHERE t.trigger = @goodbye_trigger::text
       AND engagement_holdout_bucket(@salt::text, t.user_id) < @basis_points::int
    RETURNING t.user_id, t.job_run_id
), gone AS (
    DELETE FROM engagement_message_queue q
     USING held h, engagement_job_runs r
     WHERE r.id = h.job_run_id AND q.user_id = h.user_id AND q.message_type = @goodbye_type::text
       AND q.period_start = date_trunc('day', r.as_of AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    RETURNING q.id
), ledger AS (
    DELETE FROM engagement_processed_messages l USING gone g WHERE l.message_id = g.id
), logged AS (
    UPDATE engagement_state_transitions t
       SET variant = (ARRAY['a', 'b'])[1 + engagement_holdout_bucket('variant:' || @goodbye_type::text, t.user_id) % 2]
     WHERE t.trigger = @goodbye_trigger::text
       AND engagement_holdout_bucket(@salt::text, t.user_id) >= @basis_points::int
), queued AS (
    UPDATE engagement_message_queue q
       SET variant = (ARRAY['a', 'b'])[1 + engagement_holdout_bucket('variant:' || @goodbye_type::text, q.user_id) % 2]
     WHERE q.message_type = @goodbye_type::text
       AND engagement_holdout_bucket(@salt::text, q.user_id) >= @basis_points::int
)
SELECT (SELECT count(*) FROM held) AS held, (SELECT count(*) FROM gone) AS removed
