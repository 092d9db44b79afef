-- Meta's throughput level per Cloud API number (issue 57).
--
-- Meta allows each registered business phone number 80 messages per
-- second, 1,000 once upgraded, and a fixed 20 while the number is in use
-- with the WhatsApp Business app too (Meta, "Throughput",
-- https://developers.facebook.com/documentation/business-messaging/whatsapp/throughput).
-- queue-process reads the level from the Phone Number node at the start of
-- each run; what it keeps here is what must outlive a run the Graph API
-- lies to (a field missing, of the wrong type):
--
--   on_biz_app_at  since when the number is on the WhatsApp Business app
--                  (is_on_biz_app true); NULL: not seen there. An answer
--                  that does not say (is_on_biz_app missing, not a
--                  boolean, no answer at all) keeps it: such a number
--                  stays a 20 mps number until Meta says false.
--   read_at        when queue-process last asked.
--
-- Keyed by the Cloud API phone number id (the business's number, no user
-- data).
CREATE TABLE engagement_number_throughput (
    phone_number_id text        PRIMARY KEY,
    on_biz_app_at   timestamptz,
    read_at         timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE engagement_number_throughput ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_number_throughput FROM %s', api);
    END IF;
END
$$;
