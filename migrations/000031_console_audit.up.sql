-- The operator console (engagement-console): its audit log, and the one
-- definition of a failure's "reason group" that its queue page groups by
-- and its requeue (and engagementctl requeue --error-group) selects by.
--
-- Every action the console takes writes one row here, in the transaction
-- that acts: who, when, what (the action and its filter, as JSON) and how
-- many messages it changed. Rows are only ever inserted.
CREATE TABLE engagement_console_audit (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text        NOT NULL,
    action      text        NOT NULL CHECK (action IN ('requeue', 'cancel')),
    filter      jsonb       NOT NULL,
    messages    bigint      NOT NULL CHECK (messages >= 0)
);
CREATE INDEX engagement_console_audit_at_idx ON engagement_console_audit (at DESC);

-- A failure's reason group: its error text with what varies between two
-- failures of one cause (UUIDs, and numbers of 7 digits or more: phone
-- numbers, timestamps, ids) replaced by '#', cut to 160 characters. Shorter
-- numbers stay: "answered 500" and "answered 429" are different reasons,
-- and so are the Cloud API's error codes (131026, 131047).
CREATE FUNCTION engagement_error_group(error_message text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    RETURN left(regexp_replace(error_message,
                               '[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}|[0-9]{7,}',
                               '#', 'g'), 160);

-- Closed to Supabase's Data API as migration 28 closes the rest.
ALTER TABLE engagement_console_audit ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_error_group(text) FROM PUBLIC%s', coalesce(', ' || api, ''));
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_console_audit FROM %s', api);
        EXECUTE format('REVOKE ALL ON SEQUENCE engagement_console_audit_id_seq FROM %s', api);
    END IF;
END
$$;
