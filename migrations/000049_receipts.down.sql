DROP FUNCTION IF EXISTS engagement_receipt(text, text, timestamptz, text);

DROP FUNCTION engagement_goodbye_due(timestamptz, interval, boolean, timestamptz, timestamptz,
                                     text, boolean, timestamptz, timestamptz, timestamptz);
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

-- The columns are the scheduler's (the adoption preflight refused a bot
-- table that had them): dropped with what they held.
ALTER TABLE engagement_message_queue DROP COLUMN IF EXISTS read_at, DROP COLUMN IF EXISTS delivered_at;
