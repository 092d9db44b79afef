-- The state machine's deadlines, defined once for the daily job and verify.
--
-- engagement-daily moves a user on when their deadline has come, and
-- engagementctl verify's no_user_stuck reports a user still waiting a day
-- (its grace) past it.
--
-- Both used to spell the deadlines out in their own SQL, and disagreed
-- (issue 31): verify counted a goodbye in doubt from goodbye_sent_at where
-- the job counts from its last attempt, and reported users the job had just
-- moved back to active (goodbye_undelivered) as 20 days silent. Now the
-- job's statements (scheduler/queries/daily_*.sql) ask these functions
-- "is it due at the run's as-of?", and verify asks them "was it due a day
-- before as-of?"; a user verify reports is one the job would have moved a
-- day ago, and no other.
--
-- The durations and the error text of a send in doubt are parameters, from
-- the Go side (statemachine.InactivityPeriod and GoodbyeWindow, the
-- triggers' waits; delivery.ErrOutcomeUnknown), which the job and verify
-- both pass (scheduler.DeadlineArgs). Which states each timer runs in is
-- the state machine's transition table, in Go.
--
-- Each function is plain SQL, not STRICT, and no more volatile than its
-- body, so the planner inlines it into every statement that calls it, as
-- engagement_in_shard() (migration 20): the job stays one set-based
-- statement per chunk, and a column in a call can still use an index.

-- inactivity_14d, for an active or help_flow user: silent for @inactivity
-- before as_of (last_activity_at; a user the bot recorded no activity for
-- is silent since their state row's created_at, and a user with neither is
-- never due), and not on the UTC day their last goodbye was queued
-- (goodbye_sent_at: that day's key is taken, a goodbye queued again would
-- be a duplicate) or ended (goodbye_expires_at, which goodbye_undelivered
-- sets to the run's as-of when it moves the user back): the next goodbye
-- goes out the next UTC day at the earliest, and a re-run the same day
-- changes nothing.
CREATE FUNCTION engagement_inactivity_due(as_of timestamptz, inactivity interval,
                                          last_activity_at timestamptz, created_at timestamptz,
                                          goodbye_sent_at timestamptz, goodbye_expires_at timestamptz)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(last_activity_at, created_at) < as_of - inactivity
       AND (greatest(goodbye_sent_at, goodbye_expires_at) IS NULL
            OR as_of >= (date_trunc('day', greatest(goodbye_sent_at, goodbye_expires_at) AT TIME ZONE 'UTC')
                         + interval '1 day') AT TIME ZONE 'UTC')
$$;

-- goodbye_timeout, for a goodbye_sent user: what became of their goodbye
-- (the queue row their goodbye key finds: status, error_message, sent_at,
-- and its latest attempt in the send ledger, NULL when none) says when it
-- is over at as_of:
--
--   'timed_out'    the user had their @goodbye_window to answer: delivered
--                  (sent) that long ago, or in doubt (failed with an error
--                  starting with @unknown_prefix: it may have arrived) that
--                  long after its last attempt (goodbye_sent_at, never
--                  tried); an opted-out user, or one without the message
--                  (the bot set the state, cleanup deleted it), once
--                  goodbye_expires_at (goodbye_sent_at + the window without
--                  it) has come;
--   'undelivered'  failed for good or cancelled, by its last attempt (or
--                  goodbye_sent_at, never tried) at or before as_of: the
--                  user never got it (goodbye_undelivered);
--   NULL           not yet, or still waiting to be delivered (pending, in
--                  flight: their window starts when it arrives).
--
-- last_attempt_at is read once, in the branch of a failed or cancelled
-- goodbye, so a caller may pass a subquery that runs for those alone.
CREATE FUNCTION engagement_goodbye_due(as_of timestamptz, goodbye_window interval, unknown_prefix text,
                                       opted_out boolean, goodbye_sent_at timestamptz, goodbye_expires_at timestamptz,
                                       status text, error_message text, sent_at timestamptz,
                                       last_attempt_at timestamptz)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN opted_out OR status IS NULL
        THEN CASE WHEN coalesce(goodbye_expires_at, goodbye_sent_at + goodbye_window) <= as_of THEN 'timed_out' END
        WHEN status = 'sent'
        THEN CASE WHEN sent_at + goodbye_window <= as_of THEN 'timed_out' END
        WHEN status IN ('failed', 'cancelled')
        THEN CASE WHEN coalesce(last_attempt_at, goodbye_sent_at)
                       + CASE WHEN status = 'failed' AND starts_with(coalesce(error_message, ''), unknown_prefix)
                              THEN goodbye_window ELSE interval '0' END <= as_of
                  THEN CASE WHEN status = 'failed' AND starts_with(coalesce(error_message, ''), unknown_prefix)
                            THEN 'timed_out' ELSE 'undelivered' END
             END
    END
$$;

-- reminder_due, for a remind_later user: remind_at has come.
CREATE FUNCTION engagement_reminder_due(as_of timestamptz, remind_at timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT remind_at <= as_of
$$;

-- Closed to Supabase's Data API as migration 28 closes every function of
-- the scheduler's: no EXECUTE for PUBLIC, anon or authenticated (the jobs'
-- role gets it from deploy/sql/roles.sql).
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
    f   regprocedure;
BEGIN
    FOREACH f IN ARRAY ARRAY['engagement_inactivity_due(timestamptz, interval, timestamptz, timestamptz, timestamptz, timestamptz)',
                             'engagement_goodbye_due(timestamptz, interval, text, boolean, timestamptz, timestamptz, text, text, timestamptz, timestamptz)',
                             'engagement_reminder_due(timestamptz, timestamptz)']::regprocedure[]
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC%s', f, coalesce(', ' || api, ''));
    END LOOP;
END
$$;
