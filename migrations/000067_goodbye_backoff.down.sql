-- Back to one goodbye a UTC day after any undelivered one, and an
-- opted-out user's goodbye judged by the old rule (migration 49).
CREATE OR REPLACE FUNCTION engagement_goodbye_due(as_of timestamptz, goodbye_window interval, opted_out boolean,
                                                  goodbye_sent_at timestamptz, goodbye_expires_at timestamptz,
                                                  status text, in_doubt boolean, sent_at timestamptz,
                                                  delivered_at timestamptz, last_attempt_at timestamptz)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN opted_out OR status IS NULL
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

DROP FUNCTION engagement_inactivity_due(timestamptz, interval, timestamptz, timestamptz, timestamptz, timestamptz, timestamptz);
DROP FUNCTION engagement_failure_code(text);
ALTER TABLE user_engagement_states DROP COLUMN goodbye_retry_at;
ALTER TABLE user_engagement_states DROP COLUMN goodbye_failures;
