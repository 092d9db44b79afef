-- Receipts: what WhatsApp says of a message after it accepted it (issue 43;
-- ../shared/CONTRACT.md, round six).
--
-- Meta's Cloud API reports each message's fate in webhooks (statuses[]:
-- sent, delivered, read, failed) and Baileys raises the same acks
-- (messages.update); some failures come only there, after the API said yes
-- (131026 undeliverable, 131049 Meta's per-user marketing limit, 131050 the
-- user stopped marketing messages). The queue kept the provider's message
-- id and nothing else, so "sent" meant "accepted", and a goodbye WhatsApp
-- never delivered timed its user out 48 hours later.
--
-- delivered_at and read_at are nullable, added without a default: no
-- rewrite of the bot's queue. They are the scheduler's: the adoption
-- preflight refuses a bot table that has them already.
ALTER TABLE engagement_message_queue
    ADD COLUMN delivered_at timestamptz,
    ADD COLUMN read_at timestamptz;

-- engagement_receipt applies one receipt to the message whose provider id
-- it names, and returns what is known of that message now: 'accepted'
-- (sent, no receipt of delivery yet), 'delivered', 'read' or 'failed' (its
-- status, for a message not sent). A provider id that is none of the
-- queue's (the bot's own conversation) returns NULL and changes nothing.
--
-- Receipts come again and out of order, and a message never moves back:
-- read implies delivered; delivered_at and read_at are the earliest
-- instants reported; a receipt of something already known changes
-- nothing. A 'failed' receipt for a message accepted and not yet delivered
-- (a late failure) makes it failed, its error_message naming the code, not
-- in doubt: it counts as not delivered. 'sent' (WhatsApp's servers have
-- it) says nothing the queue does not know.
--
--   EN005  p_at is infinite, before 2000, or more than 5 minutes ahead of
--          the database clock (as engagement_fire);
--   EN007  p_status is not sent, delivered, read or failed.
--
-- SECURITY DEFINER with its own search_path, as engagement_fire: the bot's
-- role gets EXECUTE on it and nothing on the queue (deploy/sql/roles.sql).
CREATE FUNCTION engagement_receipt(p_provider_message_id text, p_status text, p_at timestamptz DEFAULT NULL,
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

    RETURN CASE WHEN m.status = 'sent' AND m.read_at IS NOT NULL THEN 'read'
                WHEN m.status = 'sent' AND m.delivered_at IS NOT NULL THEN 'delivered'
                WHEN m.status = 'sent' THEN 'accepted'
                ELSE m.status END;
END
$$;

DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_receipt(text, text, timestamptz, text) SET search_path = %I, pg_temp',
                   current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_receipt(text, text, timestamptz, text) FROM PUBLIC%s',
                   coalesce(', ' || api, ''));
END
$$;

-- The goodbye's 48 hours count from its delivery when a receipt says when
-- that was (delivered_at), else from its acceptance (sent_at), as before.
-- A goodbye that failed after acceptance is 'failed', not in doubt: the
-- user never got it ('undelivered', back to active), as for any failure.
DROP FUNCTION engagement_goodbye_due(timestamptz, interval, boolean, timestamptz, timestamptz,
                                     text, boolean, timestamptz, timestamptz);
CREATE FUNCTION engagement_goodbye_due(as_of timestamptz, goodbye_window interval,
                                       opted_out boolean, goodbye_sent_at timestamptz, goodbye_expires_at timestamptz,
                                       status text, in_doubt boolean, sent_at timestamptz, delivered_at timestamptz,
                                       last_attempt_at timestamptz)
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

DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_goodbye_due(timestamptz, interval, boolean, timestamptz, '
                   'timestamptz, text, boolean, timestamptz, timestamptz, timestamptz) FROM PUBLIC%s', coalesce(', ' || api, ''));
END
$$;
