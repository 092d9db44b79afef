DROP FUNCTION IF EXISTS engagement_goodbye_due(timestamptz, interval, boolean, timestamptz, timestamptz,
                                               text, boolean, timestamptz, timestamptz);
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
REVOKE ALL ON FUNCTION engagement_goodbye_due(timestamptz, interval, text, boolean, timestamptz, timestamptz,
                                              text, text, timestamptz, timestamptz) FROM PUBLIC;
ALTER TABLE engagement_message_queue DROP COLUMN IF EXISTS in_doubt;
