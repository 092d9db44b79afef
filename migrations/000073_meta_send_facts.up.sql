-- What a Cloud API send was, as Meta will count and bill it (issue 57).
--
-- Meta prices a template by its latest category and counts a recipient
-- against the business portfolio's messaging limit only outside a customer
-- service window; both are facts of the moment of the request, which no
-- later state can tell again (a template can be recategorized, a user can
-- write after the send). So the send ledger keeps them, as queue-process
-- saw them when it made the request:
--
--   meta_category   the template's latest Meta category the request was
--                   routed by (marketing: POST /<PHONE_NUMBER_ID>/marketing_messages;
--                   any other: /messages). NULL: not a Cloud API send, or
--                   sent before this column.
--   service_window  whether the user's customer service window was open:
--                   the user's last message to the bot was less than 24
--                   hours before the request. NULL: not known.
--
-- Meta, "Route template messages by category":
-- https://developers.facebook.com/documentation/business-messaging/whatsapp/marketing-messages/route-template-messages/
-- Meta, "Messaging limits" (unique users outside a customer service window,
-- moving 24 hours, per business portfolio):
-- https://developers.facebook.com/documentation/business-messaging/whatsapp/messaging-limits
-- Meta, customer service windows (24 hours from the user's last message):
-- https://developers.facebook.com/documentation/business-messaging/whatsapp/messages/send-messages#customer-service-windows
ALTER TABLE engagement_processed_messages
    ADD COLUMN IF NOT EXISTS meta_category text
        CHECK (meta_category IN ('marketing', 'utility', 'authentication', 'service')),
    ADD COLUMN IF NOT EXISTS service_window boolean;

-- engagement_service_window_open is the one rule for "inside a customer
-- service window": the user's last message (user_engagement_states'
-- last_activity_at, which only the user's own moves through
-- engagement_fire advance) came at most 24 hours before at, and not after
-- it. Used by the send budget under --daily-limit auto (such a recipient
-- costs the portfolio's limit nothing) and by the send ledger (a utility
-- template inside the window is free).
CREATE OR REPLACE FUNCTION engagement_service_window_open(last_user_message timestamptz, at timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path TO 'pg_catalog', 'pg_temp'
AS $$
    SELECT coalesce(last_user_message <= at AND at < last_user_message + interval '24 hours', false)
$$;

DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_service_window_open(timestamptz, timestamptz) FROM PUBLIC%s',
                   coalesce(', ' || api, ''));
END
$$;
