-- Each Cloud API template's latest Meta category (issue 57), which
-- queue-process routes a send by: MARKETING to
-- POST /<PHONE_NUMBER_ID>/marketing_messages, any other category to
-- /<PHONE_NUMBER_ID>/messages. Meta, "Route template messages by category"
-- (updated 2026-09-21):
-- https://developers.facebook.com/documentation/business-messaging/whatsapp/marketing-messages/route-template-messages/
-- says to keep this mapping (account id, template id, name, language,
-- latest category), fill it from the Message Templates API and keep it
-- current with the template_category_update webhook's completed
-- notifications (new_category); an impending one is information only.
--
-- A row per template name and language, as Meta's word last said it:
--
--   source      templates_api  queue-process read it from the Message
--                              Templates API (--whatsapp-business-account-id)
--               webhook        the console took a completed
--                              template_category_update notification
--   decided_at  when Meta said it: the webhook's entry.time (a time in the
--               future counts as now), the API read's time. The newest
--               wins, whatever order they arrive in: an older one changes
--               nothing.
--
-- The templates file's "category" is not stored: it is the operator's
-- declaration, read at every run, and counts only for a template Meta has
-- said nothing about here (an old file can then never undo a change Meta
-- made).
CREATE TABLE engagement_template_categories (
    template_name     text        NOT NULL CHECK (length(template_name) BETWEEN 1 AND 512),
    template_language text        NOT NULL CHECK (length(template_language) BETWEEN 1 AND 32),
    category          text        NOT NULL CHECK (category IN ('MARKETING', 'UTILITY', 'AUTHENTICATION')),
    template_id       text        CHECK (length(template_id) <= 64),
    account_id        text        CHECK (length(account_id) <= 64),
    source            text        NOT NULL CHECK (source IN ('templates_api', 'webhook')),
    decided_at        timestamptz NOT NULL,
    PRIMARY KEY (template_name, template_language)
);

-- One more reason a message is cancelled: a marketing template to a +1
-- (US) number, which Meta does not deliver since 2025-04-01 (cancelled
-- before its request; queue-process, the Cloud API only). NOT VALID, as
-- before: only new rows are checked.
ALTER TABLE engagement_message_queue
    DROP CONSTRAINT IF EXISTS engagement_message_queue_cancel_reason_check,
    ADD CONSTRAINT engagement_message_queue_cancel_reason_check
        CHECK (cancel_reason IN ('opted_out', 'stale', 'no_user', 'operator', 'frequency', 'erased', 'holdout',
                                 'us_marketing_blocked')) NOT VALID;

-- Closed to Supabase's Data API as migration 28 closes the rest.
ALTER TABLE engagement_template_categories ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_template_categories FROM %s', api);
    END IF;
END
$$;
