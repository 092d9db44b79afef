-- Receipts that come first (issue 55; ../shared/CONTRACT.md, round seven).
--
-- Meta posts a message's `sent` and `delivered` statuses within
-- milliseconds of answering the API call, and Baileys acks within about a
-- second: often before queue-process has recorded the provider id they
-- name. engagement_receipt answered NULL for an id it did not know yet,
-- and the receipt was gone: measured, 250 of 250 statuses posted before
-- the API's answer, and a late 131026 lost that way left its user dormant.
--
-- Now such a receipt is kept, in engagement_receipt_inbox (the provider
-- id, the status, its instant and code: no user data), and applied when a
-- send is recorded under that id, in the recording's transaction, through
-- engagement_receipt itself: exactly as if it had come after, by the same
-- never-backwards rules. Kept receipts that never match (the bot's own
-- conversation, which the bot reports too) are dropped after 7 days by the
-- retention cleanup (engagementctl cleanup).
CREATE TABLE engagement_receipt_inbox (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider_message_id text        NOT NULL CHECK (provider_message_id <> '' AND length(provider_message_id) <= 256),
    status              text        NOT NULL CHECK (status IN ('sent', 'delivered', 'read', 'failed')),
    at                  timestamptz NOT NULL,
    error_code          text        CHECK (length(error_code) <= 64),
    received_at         timestamptz NOT NULL DEFAULT now(),
    -- One row per receipt: Meta resends a status until it is answered
    -- 200, and a repeat is kept once.
    CONSTRAINT engagement_receipt_inbox_receipt_key UNIQUE (provider_message_id, status, at)
);
CREATE INDEX engagement_receipt_inbox_received_idx ON engagement_receipt_inbox (received_at);

-- The rendezvous of a receipt that finds no message and a send recorded at
-- the same moment. Each takes its provider id's row here first (inserted,
-- and deleted again before its transaction ends, so the table is empty at
-- rest), then looks for the other with a fresh snapshot. Two transactions
-- inserting the same key meet on the primary key: the second waits until
-- the first ends and so sees what it committed. Without it, a receipt
-- could look for its message just before the send's commit while the
-- send looked for kept receipts just before the receipt's: each would
-- miss the other, and the receipt would never apply. A lock per provider
-- id, never a table's: receipts and sends of other messages never wait.
CREATE TABLE engagement_receipt_gate (
    provider_message_id text PRIMARY KEY
);

-- engagement_receipt_gate_pass takes p_provider_message_id's turn at the
-- gate: it returns once no other transaction is passing with that id.
CREATE FUNCTION engagement_receipt_gate_pass(p_provider_message_id text)
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO engagement_receipt_gate (provider_message_id) VALUES (p_provider_message_id)
        ON CONFLICT (provider_message_id) DO NOTHING;
    DELETE FROM engagement_receipt_gate WHERE provider_message_id = p_provider_message_id;
$$;

-- engagement_receipt as migration 52 made it, and a receipt for a provider
-- id no message has yet is kept (after its turn at the gate, looking once
-- more) instead of dropped. It still returns NULL for it.
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
        -- Not recorded yet, or not the scheduler's: wait for a send being
        -- recorded under this id, then look again (a new snapshot); still
        -- none, keep the receipt for the send to find.
        PERFORM engagement_receipt_gate_pass(p_provider_message_id);
        SELECT * INTO m
          FROM engagement_message_queue q
         WHERE q.provider_message_id = p_provider_message_id
         ORDER BY q.created_at DESC
         LIMIT 1
           FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            IF length(p_provider_message_id) <= 256 THEN
                INSERT INTO engagement_receipt_inbox (provider_message_id, status, at, error_code)
                VALUES (p_provider_message_id, p_status, at, left(nullif(btrim(p_error_code), ''), 64))
                    ON CONFLICT ON CONSTRAINT engagement_receipt_inbox_receipt_key DO NOTHING;
            END IF;
            RETURN NULL;
        END IF;
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

-- When a send is recorded under a provider id (settle.sql, recovery from
-- the send ledger, whatever door), the receipts kept for it apply, in the
-- order they came, in the same transaction: after its turn at the gate, so
-- that a receipt being kept at this moment is seen too.
CREATE FUNCTION engagement_receipt_inbox_apply()
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

-- Only when the id changes: settle.sql and recovery set the column on
-- every row they record, most often to what it was.
CREATE TRIGGER engagement_receipt_inbox_apply
    AFTER UPDATE OF provider_message_id ON engagement_message_queue
    FOR EACH ROW
    WHEN (NEW.provider_message_id IS NOT NULL AND NEW.provider_message_id IS DISTINCT FROM OLD.provider_message_id)
    EXECUTE FUNCTION engagement_receipt_inbox_apply();
CREATE TRIGGER engagement_receipt_inbox_apply_insert
    AFTER INSERT ON engagement_message_queue
    FOR EACH ROW
    WHEN (NEW.provider_message_id IS NOT NULL)
    EXECUTE FUNCTION engagement_receipt_inbox_apply();

-- A message in doubt after a crash (its request may have reached the
-- webhook's receiver) that is no longer wanted is looked up before it is
-- cancelled: a probe under its own key, which the receiver never sends and
-- which spends the key there. looked_up_at, in the send ledger, says a
-- lookup was made, before its request: a later lookup answered "a repeat"
-- may then be that lookup's own trace rather than a send.
ALTER TABLE engagement_processed_messages ADD COLUMN looked_up_at timestamptz;

-- Opting out cancels the user's pending messages, but for one in doubt.
-- engagement_consent sets the user's consent: opted out (p_opt_out) or in,
-- from p_source (required), as of p_at (NULL: now), by p_actor (an
-- operator; NULL: none). It returns whether it changed anything: false for
-- a user already so, recording nothing. Opting out cancels the user's
-- pending messages (cancel_reason 'opted_out') in the same statement; a
-- message already claimed is checked again just before its send, and one
-- whose send had started when the opt-out committed may still go. A
-- pending message in doubt (its request may have reached the receiver
-- before a crash, migration 65) is not cancelled here: the claim finds it
-- unwanted and asks the receiver first, so that a message the user may
-- have got is never recorded as never sent.
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
         WHERE user_id = p_user_id AND status = 'pending' AND NOT coalesce(in_doubt, false);
    END IF;
    RETURN true;
END
$$;


ALTER TABLE engagement_receipt_inbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE engagement_receipt_gate ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_receipt(text, text, timestamptz, text) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION engagement_consent(uuid, boolean, text, timestamptz, text) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION engagement_receipt_inbox_apply() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION engagement_receipt_gate_pass(text) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_receipt_inbox_apply() FROM PUBLIC%s', coalesce(', ' || api, ''));
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_receipt_gate_pass(text) FROM PUBLIC%s', coalesce(', ' || api, ''));
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_receipt_inbox, engagement_receipt_gate FROM %s', api);
        EXECUTE format('REVOKE ALL ON SEQUENCE engagement_receipt_inbox_id_seq FROM %s', api);
    END IF;
END
$$;
