-- Receipts that come before their send are dropped again, as before
-- migration 65; the ones kept are lost with the table.
DROP TRIGGER IF EXISTS engagement_receipt_inbox_apply ON engagement_message_queue;
DROP TRIGGER IF EXISTS engagement_receipt_inbox_apply_insert ON engagement_message_queue;
DROP FUNCTION IF EXISTS engagement_receipt_inbox_apply();

-- WhatsApp's error 131050 (the user stopped marketing messages from this
-- business) in a receipt opts the user out: the next goodbye would fail
-- the same way, and each failure lowers the number's quality rating.
CREATE OR REPLACE FUNCTION engagement_receipt(p_provider_message_id text, p_status text, p_at timestamptz DEFAULT NULL,
                                              p_error_code text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    at  timestamptz := coalesce(p_at, now());
    m   engagement_message_queue%ROWTYPE;
    mid uuid;
BEGIN
    IF p_status IS NULL OR p_status NOT IN ('sent', 'delivered', 'read', 'failed') THEN
        RAISE EXCEPTION 'engagement_receipt: unknown status %', coalesce(quote_literal(p_status), 'NULL')
            USING ERRCODE = 'EN007', HINT = 'a receipt is sent, delivered, read or failed';
    END IF;
    IF NOT isfinite(at) OR at < timestamptz '2000-01-01 00:00:00+00' OR at > now() + interval '5 minutes' THEN
        RAISE EXCEPTION 'engagement_receipt: instant % is out of range (2000-01-01 to 5 minutes past the database clock, %)', at, now()
            USING ERRCODE = 'EN005';
    END IF;
    IF p_provider_message_id IS NULL OR p_provider_message_id = '' THEN
        RETURN NULL;
    END IF;

    SELECT * INTO m
      FROM engagement_message_queue q
     WHERE q.provider_message_id = p_provider_message_id
     ORDER BY q.created_at DESC
     LIMIT 1
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    mid := m.id;

    IF p_status IN ('delivered', 'read') AND m.status = 'sent' THEN
        UPDATE engagement_message_queue q
           SET delivered_at = least(q.delivered_at, at),
               read_at      = CASE WHEN p_status = 'read' THEN least(q.read_at, at) ELSE q.read_at END
         WHERE q.id = m.id
           AND (q.delivered_at IS NULL OR q.delivered_at > at
                OR (p_status = 'read' AND (q.read_at IS NULL OR q.read_at > at)))
        RETURNING q.* INTO m;
        IF NOT FOUND THEN -- known already: INTO left m empty
            SELECT * INTO m FROM engagement_message_queue q WHERE q.id = mid;
        END IF;
    ELSIF p_status = 'failed' AND m.status = 'sent' AND m.delivered_at IS NULL THEN
        UPDATE engagement_message_queue q
           SET status = 'failed',
               in_doubt = false,
               error_message = 'failed after acceptance: WhatsApp error ' || coalesce(nullif(btrim(p_error_code), ''), 'with no code')
         WHERE q.id = m.id
        RETURNING q.* INTO m;
    END IF;
    IF p_status = 'failed' AND btrim(p_error_code) = '131050' AND m.user_id IS NOT NULL
       AND EXISTS (SELECT FROM user_profiles p WHERE p.user_id = m.user_id) THEN
        PERFORM engagement_consent(m.user_id, true, 'whatsapp:131050', at, NULL);
    END IF;

    RETURN CASE WHEN m.status = 'sent' AND m.read_at IS NOT NULL THEN 'read'
                WHEN m.status = 'sent' AND m.delivered_at IS NOT NULL THEN 'delivered'
                WHEN m.status = 'sent' THEN 'accepted'
                ELSE m.status END;
END
$$;

-- engagement_consent as migration 52 made it.
-- engagement_consent sets the user's consent: opted out (p_opt_out) or in,
-- from p_source (required), as of p_at (NULL: now), by p_actor (an
-- operator; NULL: none). It returns whether it changed anything: false for
-- a user already so, recording nothing. Opting out cancels the user's
-- pending messages (cancel_reason 'opted_out') in the same statement; a
-- message already claimed is checked again just before its send, and one
-- whose send had started when the opt-out committed may still go.
--   EN003  no such user (no user_profiles row: the flag lives there)
--   EN005  p_at is infinite, before 2000, or more than 5 minutes ahead of
--          the database clock
--   EN008  p_source is empty or longer than 200 characters
CREATE OR REPLACE FUNCTION engagement_consent(p_user_id uuid, p_opt_out boolean, p_source text, p_at timestamptz, p_actor text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    at  timestamptz := coalesce(p_at, now());
    cur boolean;
BEGIN
    IF p_source IS NULL OR btrim(p_source) = '' OR length(p_source) > 200 OR length(p_actor) > 200 THEN
        RAISE EXCEPTION 'engagement consent: a source (1 to 200 characters) is required'
            USING ERRCODE = 'EN008';
    END IF;
    IF NOT isfinite(at) OR at < timestamptz '2000-01-01 00:00:00+00' OR at > now() + interval '5 minutes' THEN
        RAISE EXCEPTION 'engagement consent: instant % is out of range (2000-01-01 to 5 minutes past the database clock, %)', at, now()
            USING ERRCODE = 'EN005';
    END IF;
    SELECT p.reengagement_opt_out INTO cur FROM user_profiles p WHERE p.user_id = p_user_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'engagement consent: no such user %', p_user_id USING ERRCODE = 'EN003';
    END IF;
    IF cur IS NOT DISTINCT FROM p_opt_out THEN
        RETURN false;
    END IF;
    UPDATE user_profiles SET reengagement_opt_out = p_opt_out WHERE user_id = p_user_id;
    INSERT INTO engagement_consent_events (user_id, opted_out, source, actor, at)
    VALUES (p_user_id, p_opt_out, btrim(p_source), nullif(btrim(p_actor), ''), at);
    IF p_opt_out THEN
        UPDATE engagement_message_queue
           SET status = 'cancelled', cancel_reason = 'opted_out'
         WHERE user_id = p_user_id AND status = 'pending';
    END IF;
    RETURN true;
END
$$;


ALTER TABLE engagement_processed_messages DROP COLUMN IF EXISTS looked_up_at;
DROP FUNCTION IF EXISTS engagement_receipt_gate_pass(text);
DROP TABLE IF EXISTS engagement_receipt_gate;
DROP TABLE IF EXISTS engagement_receipt_inbox;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_receipt(text, text, timestamptz, text) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION engagement_consent(uuid, boolean, text, timestamptz, text) SET search_path = %I, pg_temp', current_schema());
END
$$;
