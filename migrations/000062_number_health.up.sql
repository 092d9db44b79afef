-- Meta's verdict on the Cloud API number (queue-process, issue 46): the
-- phone number's quality rating and messaging limit tier as the Graph API
-- (the Phone Number node's quality_rating, messaging_limit_tier) or the
-- phone_number_quality_update webhook last said, and each template's
-- status as the message_template_status_update webhook last said. The
-- claim holds marketing kinds while the rating is RED or the number
-- FLAGGED, and messages whose template is PAUSED or DISABLED; --daily-limit
-- auto follows the tier. A row per transport, a row per template name.
CREATE TABLE engagement_number_health (
    transport            text        PRIMARY KEY,
    quality_rating       text,
    messaging_limit_tier text,
    flagged              boolean     NOT NULL DEFAULT false,
    read_at              timestamptz NOT NULL DEFAULT now(),
    source               text        NOT NULL
);

CREATE TABLE engagement_template_status (
    template_name text        PRIMARY KEY,
    status        text        NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Closed to Supabase's Data API as migration 28 closes the rest.
ALTER TABLE engagement_number_health ENABLE ROW LEVEL SECURITY;
ALTER TABLE engagement_template_status ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_number_health, engagement_template_status FROM %s', api);
    END IF;
END
$$;
