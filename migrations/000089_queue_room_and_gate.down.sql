-- The queue's pages full again (for rows queued from now on), the receipt
-- gate logged, and its pass a LANGUAGE sql function called by the trigger,
-- as migration 65 made them.
ALTER TABLE engagement_message_queue RESET (fillfactor);
ALTER TABLE engagement_receipt_gate SET LOGGED;

CREATE OR REPLACE FUNCTION engagement_receipt_gate_pass(p_provider_message_id text)
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO engagement_receipt_gate (provider_message_id) VALUES (p_provider_message_id)
        ON CONFLICT (provider_message_id) DO NOTHING;
    DELETE FROM engagement_receipt_gate WHERE provider_message_id = p_provider_message_id;
$$;

CREATE OR REPLACE FUNCTION engagement_receipt_inbox_apply()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    r engagement_receipt_inbox%ROWTYPE;
BEGIN
    PERFORM engagement_receipt_gate_pass(NEW.provider_message_id);
    FOR r IN SELECT * FROM engagement_receipt_inbox i
              WHERE i.provider_message_id = NEW.provider_message_id
              ORDER BY i.id
                FOR UPDATE
    LOOP
        PERFORM engagement_receipt(r.provider_message_id, r.status, r.at, r.error_code);
        DELETE FROM engagement_receipt_inbox WHERE id = r.id;
    END LOOP;
    RETURN NULL;
END
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_receipt_inbox_apply() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION engagement_receipt_gate_pass(text) SET search_path = %I, pg_temp', current_schema());
END
$$;
