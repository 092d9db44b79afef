-- Back to consent in arrival order: engagement_consent as migration 65
-- left it (the flag follows the last call to arrive; a call that changes
-- nothing records nothing) and engagement_opt_out as migration 54 made it
-- (the confirmation queued in its own body). Superseded rows are dropped
-- from the log: they changed nothing, and the old functions know no such
-- row.
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

CREATE OR REPLACE FUNCTION engagement_opt_out(p_user_id uuid, p_source text, p_at timestamptz DEFAULT NULL, p_actor text DEFAULT NULL,
                                              p_confirm boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    at timestamptz := coalesce(p_at, now());
BEGIN
    IF NOT engagement_consent(p_user_id, true, p_source, p_at, p_actor) THEN
        RETURN false;
    END IF;
    IF p_confirm AND at > now() - interval '24 hours' THEN
        INSERT INTO engagement_message_queue
               (user_id, message_type, message_key, destination, destination_jid,
                scheduled_for, idempotency_key, period_start, replay_until)
        SELECT p.user_id, 'opt_out_confirmation', 'engagement.opt_out.confirmation', r.destination, r.destination_jid,
               now(), p.user_id::text || ':opt_out_confirmation:' || floor(extract(epoch FROM at) * 1000)::bigint,
               at, at
          FROM user_profiles p
         CROSS JOIN LATERAL engagement_route(p.preferred_destination, p.group_jid, p.whatsapp_jid) r
         WHERE p.user_id = p_user_id AND r.destination_jid IS NOT NULL
        ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
    END IF;
    RETURN true;
END
$$;

DELETE FROM engagement_consent_events WHERE superseded;
ALTER TABLE engagement_consent_events DROP COLUMN IF EXISTS superseded;
DROP FUNCTION IF EXISTS engagement_consent_record(uuid, boolean, text, timestamptz, text, boolean);
DROP TABLE IF EXISTS engagement_consent_newest;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_consent(uuid, boolean, text, timestamptz, text) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION engagement_opt_out(uuid, text, timestamptz, text, boolean) SET search_path = %I, pg_temp', current_schema());
END
$$;
