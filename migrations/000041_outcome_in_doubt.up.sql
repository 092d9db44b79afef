-- A send whose outcome is unknown, said by a column instead of its error's
-- text.
--
-- A message fails "in doubt" when its send may have reached the receiver
-- and the transport cannot de-duplicate a second one (a timeout, a reset
-- connection, a worker killed mid-send): it is never sent again, and its
-- goodbye counts as delivered for the 48-hour timeout. The daily job and
-- verify recognised it by the error_message's first words ("outcome
-- unknown"), which tied the scheduler to the delivery package's error text
-- (issue 35). queue-process now sets in_doubt on such a message (and
-- clears it on any other outcome, and engagementctl requeue clears it), and
-- the goodbye's deadline reads the column.
--
-- Added nullable (as every column the scheduler adds to the bot's tables)
-- with a constant default: no rewrite of the bot's queue, only the
-- failed rows in doubt are updated.
ALTER TABLE engagement_message_queue ADD COLUMN in_doubt boolean DEFAULT false;

UPDATE engagement_message_queue
   SET in_doubt = true
 WHERE status = 'failed' AND starts_with(coalesce(error_message, ''), 'outcome unknown');

-- goodbye_timeout's deadline (migration 29), with in_doubt for the error's
-- text: the same verdicts, 'timed_out', 'undelivered' or NULL.
DROP FUNCTION engagement_goodbye_due(timestamptz, interval, text, boolean, timestamptz, timestamptz,
                                     text, text, timestamptz, timestamptz);
CREATE FUNCTION engagement_goodbye_due(as_of timestamptz, goodbye_window interval,
                                       opted_out boolean, goodbye_sent_at timestamptz, goodbye_expires_at timestamptz,
                                       status text, in_doubt boolean, sent_at timestamptz,
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
                       + CASE WHEN status = 'failed' AND in_doubt THEN goodbye_window ELSE interval '0' END <= as_of
                  THEN CASE WHEN status = 'failed' AND in_doubt THEN 'timed_out' ELSE 'undelivered' END
             END
    END
$$;

DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_goodbye_due(timestamptz, interval, boolean, timestamptz, '
                   'timestamptz, text, boolean, timestamptz, timestamptz) FROM PUBLIC%s', coalesce(', ' || api, ''));
END
$$;
