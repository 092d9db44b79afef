-- Late failures by code (issue 55, finding 6): a goodbye that failed for
-- good is no longer followed by a new one the next UTC day, whatever the
-- failure. The daily job's goodbye_timeout step, which moves the user of an
-- undelivered goodbye back to active (goodbye_undelivered), now records on
-- the user's row how many goodbyes in a row failed and when the next one
-- may go; inactivity_14d waits for it.
--
--   goodbye_failures  the goodbyes in a row that failed for good since the
--                     user last wrote (NULL: none). A delivered goodbye
--                     (or one in doubt) ends the run of failures; the
--                     inactivity step starts a new count for a user who
--                     wrote since their last goodbye. Cancelled goodbyes
--                     and 131050 (the user stopped marketing messages:
--                     engagement_receipt and queue-process opt them out)
--                     are not counted.
--   goodbye_retry_at  the earliest instant the next goodbye may be queued,
--                     from the failed goodbye's goodbye_sent_at and the
--                     schedule for its code (statemachine.GoodbyeBackoff,
--                     passed by the job): 131049 (Meta's per-user limit
--                     on marketing messages) 2, 4, 8, 16 days; any other
--                     code, or none, 7, 14, 28 days; past the schedule's
--                     end 'infinity': no goodbye until the user writes.
--                     NULL: no wait beyond the one goodbye a UTC day.
--
-- Both are the scheduler's columns on the bot's table, added nullable and
-- without a default, so the table is not rewritten.
ALTER TABLE user_engagement_states ADD COLUMN goodbye_failures integer;
ALTER TABLE user_engagement_states ADD COLUMN goodbye_retry_at timestamptz;

-- The WhatsApp error code a failed message's error_message names, or NULL:
--   'failed after acceptance: WhatsApp error 131026'  a late failure,
--        written by engagement_receipt (migration 52) from the receipt's
--        code;
--   'whatsapp: error 131026 (permanent), HTTP 400'   the Cloud API's
--        synchronous refusal, as queue-process records the transport's
--        error (sender/transport: apiError).
-- Any other text (the webhook transport's HTTP failures) has no code.
-- Plain SQL, inlined where it is called.
CREATE FUNCTION engagement_failure_code(error_message text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT substring(error_message FROM '(?:WhatsApp error |^whatsapp: error )([0-9]+)')
$$;

-- inactivity_14d's deadline (migration 29's, plus the backoff): silent for
-- @inactivity, not on the UTC day their last goodbye was queued or ended,
-- and, after goodbyes that failed (goodbye_retry_at set by
-- goodbye_undelivered), not before goodbye_retry_at, unless the user wrote
-- since that goodbye was queued (their activity is after goodbye_sent_at):
-- a user who writes is never held back by what failed before. The
-- six-argument function stays for the jobs of earlier releases.
CREATE FUNCTION engagement_inactivity_due(as_of timestamptz, inactivity interval,
                                          last_activity_at timestamptz, created_at timestamptz,
                                          goodbye_sent_at timestamptz, goodbye_expires_at timestamptz,
                                          goodbye_retry_at timestamptz)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(last_activity_at, created_at) < as_of - inactivity
       AND (greatest(goodbye_sent_at, goodbye_expires_at) IS NULL
            OR as_of >= (date_trunc('day', greatest(goodbye_sent_at, goodbye_expires_at) AT TIME ZONE 'UTC')
                         + interval '1 day') AT TIME ZONE 'UTC')
       AND (goodbye_retry_at IS NULL
            OR as_of >= goodbye_retry_at
            OR coalesce(last_activity_at, created_at) > goodbye_sent_at)
$$;

-- goodbye_timeout's verdict (migration 49's), with one change: an
-- opted-out user's goodbye is judged by what became of it, like anyone's,
-- once it has an outcome. Before, an opted-out user completed on the old
-- rule whatever the goodbye's fate, so a goodbye refused with 131050 (which
-- opts the user out) timed its user out to dormant: the contract says a
-- goodbye that was not delivered never does. Now a failed or cancelled
-- goodbye moves an opted-out user back to active (goodbye_undelivered),
-- where the inactivity step never touches them while they stay opted out;
-- a delivered one times them out 48 hours after its delivery. Only a
-- goodbye still pending or in flight (which claim cancels: it is never
-- sent to them) keeps the old rule for an opted-out user, so that they
-- are never left in goodbye_sent.
CREATE OR REPLACE FUNCTION engagement_goodbye_due(as_of timestamptz, goodbye_window interval, opted_out boolean,
                                                  goodbye_sent_at timestamptz, goodbye_expires_at timestamptz,
                                                  status text, in_doubt boolean, sent_at timestamptz,
                                                  delivered_at timestamptz, last_attempt_at timestamptz)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN status IS NULL OR (opted_out AND status NOT IN ('sent', 'failed', 'cancelled'))
        THEN CASE WHEN coalesce(goodbye_expires_at, goodbye_sent_at + goodbye_window) <= as_of THEN 'timed_out' END
        WHEN status = 'sent'
        THEN CASE WHEN coalesce(delivered_at, sent_at) + goodbye_window <= as_of THEN 'timed_out' END
        WHEN status IN ('failed', 'cancelled')
        THEN CASE WHEN coalesce(last_attempt_at, goodbye_sent_at)
                       + CASE WHEN status = 'failed' AND in_doubt THEN goodbye_window ELSE interval '0' END <= as_of
                  THEN CASE WHEN status = 'failed' AND in_doubt THEN 'timed_out' ELSE 'undelivered' END
             END
    END
$$;

-- Closed to PUBLIC, as migration 28 closes every function.
REVOKE ALL ON FUNCTION engagement_failure_code(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION engagement_inactivity_due(timestamptz, interval, timestamptz, timestamptz, timestamptz, timestamptz, timestamptz) FROM PUBLIC;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON FUNCTION engagement_failure_code(text) FROM %s', api);
        EXECUTE format('REVOKE ALL ON FUNCTION engagement_inactivity_due(timestamptz, interval, timestamptz, timestamptz, timestamptz, timestamptz, timestamptz) FROM %s', api);
    END IF;
END
$$;
