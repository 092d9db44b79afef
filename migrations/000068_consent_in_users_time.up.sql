-- Consent in the user's time (issue 56; ../shared/CONTRACT.md, round
-- seven): the p_at of engagement_opt_out and engagement_opt_in (and Meta's
-- timestamp of a user_preferences entry, WhatsApp's refusal with 131050)
-- is when the user said it, and the flag follows the newest of them,
-- whatever order the calls arrive in. Until now it followed arrival order:
-- a signed "stop" stamped T, then a "resume" stamped T - 1 h that Meta
-- resent later, opted the user back in.
--
-- engagement_consent_newest is the newest wish each user was heard to
-- make (which way, and when they said it), whether or not it changed the
-- flag: a repeated "stop" said after a first one moves it on, so that a
-- "resume" said between the two, arriving last, is older than the newest
-- and changes nothing. No user data but the user id. A user without a row
-- (no call yet: an adopted database where the bot set the flag itself)
-- keeps the old behaviour: the call compares with the flag.
CREATE TABLE engagement_consent_newest (
    user_id   uuid        PRIMARY KEY,
    opted_out boolean     NOT NULL,
    at        timestamptz NOT NULL
);

-- What the log said so far is taken as it was applied: each user's last
-- change (by id) is their newest wish, the one the flag shows.
INSERT INTO engagement_consent_newest (user_id, opted_out, at)
SELECT DISTINCT ON (e.user_id) e.user_id, e.opted_out, e.at
  FROM engagement_consent_events e
 ORDER BY e.user_id, e.id DESC;

-- A call older than the user's newest wish is kept in the log, superseded:
-- the user said it, and the record of their consent shows it, but it
-- changed nothing. Rows recorded before this migration are changes.
ALTER TABLE engagement_consent_events ADD COLUMN superseded boolean NOT NULL DEFAULT false;

-- engagement_consent_record sets the user's consent: opted out
-- (p_opt_out) or in, from p_source (required), said at p_at (NULL: the
-- moment the call runs, clock_timestamp(), so that calls made one after
-- the other in one transaction are in that order), by p_actor (an
-- operator; NULL: none), and says what it did:
--
--   'changed'     the call is the user's newest wish and the flag was the
--                 other way: the flag is set, the change recorded in
--                 engagement_consent_events; an opt-out cancels the user's
--                 pending messages but those in doubt (migration 65: the
--                 claim asks the receiver first) and, with p_confirm, said
--                 within the last 24 hours and to a user with a route,
--                 queues the opt-out's confirmation (migration 54);
--   'unchanged'   the newest wish, and the flag was so already: nothing
--                 is recorded (it is remembered as the newest wish);
--   'superseded'  older than the user's newest wish: recorded in the log
--                 as superseded (once: a resend of a call the log has, the
--                 same way, source and instant, is not recorded again),
--                 and nothing else: no flag, no cancel, no confirmation.
--
-- Older is by the instant, and at the same instant an opt-in is older
-- than an opt-out: between a "stop" and a "resume" said at once, the
-- scheduler would rather say nothing. The user's profile row is locked
-- first (FOR NO KEY UPDATE), so calls for one user are serialized: the
-- newest wish, the flag and the log move together.
--   EN003  no such user (no user_profiles row: the flag lives there)
--   EN005  p_at is infinite, before 2000, or more than 5 minutes ahead of
--          the database clock
--   EN008  p_source is empty or longer than 200 characters
CREATE FUNCTION engagement_consent_record(p_user_id uuid, p_opt_out boolean, p_source text, p_at timestamptz,
                                          p_actor text, p_confirm boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    said_at timestamptz := coalesce(p_at, clock_timestamp());
    src     text := btrim(p_source);
    cur     boolean;
    newest  engagement_consent_newest%ROWTYPE;
BEGIN
    IF p_source IS NULL OR btrim(p_source) = '' OR length(p_source) > 200 OR length(p_actor) > 200 THEN
        RAISE EXCEPTION 'engagement consent: a source (1 to 200 characters) is required'
            USING ERRCODE = 'EN008';
    END IF;
    IF NOT isfinite(said_at) OR said_at < timestamptz '2000-01-01 00:00:00+00' OR said_at > now() + interval '5 minutes' THEN
        RAISE EXCEPTION 'engagement consent: instant % is out of range (2000-01-01 to 5 minutes past the database clock, %)', said_at, now()
            USING ERRCODE = 'EN005';
    END IF;
    SELECT p.reengagement_opt_out INTO cur FROM user_profiles p WHERE p.user_id = p_user_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'engagement consent: no such user %', p_user_id USING ERRCODE = 'EN003';
    END IF;

    SELECT * INTO newest FROM engagement_consent_newest n WHERE n.user_id = p_user_id;
    IF FOUND AND (said_at, p_opt_out) < (newest.at, newest.opted_out) THEN
        INSERT INTO engagement_consent_events (user_id, opted_out, source, actor, at, superseded)
        SELECT p_user_id, p_opt_out, src, nullif(btrim(p_actor), ''), said_at, true
         WHERE NOT EXISTS (SELECT FROM engagement_consent_events e
                            WHERE e.user_id = p_user_id AND e.opted_out = p_opt_out
                              AND e.source = src AND e.at = said_at);
        RETURN 'superseded';
    END IF;
    INSERT INTO engagement_consent_newest (user_id, opted_out, at) VALUES (p_user_id, p_opt_out, said_at)
        ON CONFLICT (user_id) DO UPDATE SET opted_out = excluded.opted_out, at = excluded.at;
    IF cur IS NOT DISTINCT FROM p_opt_out THEN
        RETURN 'unchanged';
    END IF;

    UPDATE user_profiles SET reengagement_opt_out = p_opt_out WHERE user_id = p_user_id;
    INSERT INTO engagement_consent_events (user_id, opted_out, source, actor, at)
    VALUES (p_user_id, p_opt_out, src, nullif(btrim(p_actor), ''), said_at);
    IF p_opt_out THEN
        UPDATE engagement_message_queue
           SET status = 'cancelled', cancel_reason = 'opted_out'
         WHERE user_id = p_user_id AND status = 'pending' AND NOT coalesce(in_doubt, false);
    END IF;
    IF p_opt_out AND p_confirm AND said_at > now() - interval '24 hours' THEN
        INSERT INTO engagement_message_queue
               (user_id, message_type, message_key, destination, destination_jid,
                scheduled_for, idempotency_key, period_start, replay_until)
        SELECT p.user_id, 'opt_out_confirmation', 'engagement.opt_out.confirmation', r.destination, r.destination_jid,
               now(), p.user_id::text || ':opt_out_confirmation:' || floor(extract(epoch FROM said_at) * 1000)::bigint,
               said_at, said_at
          FROM user_profiles p
         CROSS JOIN LATERAL engagement_route(p.preferred_destination, p.group_jid, p.whatsapp_jid) r
         WHERE p.user_id = p_user_id AND r.destination_jid IS NOT NULL
        ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
    END IF;
    RETURN 'changed';
END
$$;

-- The calls keep their signatures and their answer (whether the call
-- changed the user's consent: a superseded one did not); engagement_receipt
-- (131050) and the bot's grants go on calling them as before.
CREATE OR REPLACE FUNCTION engagement_consent(p_user_id uuid, p_opt_out boolean, p_source text, p_at timestamptz, p_actor text)
RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
AS $$ SELECT engagement_consent_record(p_user_id, p_opt_out, p_source, p_at, p_actor) = 'changed' $$;

CREATE OR REPLACE FUNCTION engagement_opt_out(p_user_id uuid, p_source text, p_at timestamptz DEFAULT NULL, p_actor text DEFAULT NULL,
                                              p_confirm boolean DEFAULT false)
RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
AS $$ SELECT engagement_consent_record(p_user_id, true, p_source, p_at, p_actor, p_confirm) = 'changed' $$;

ALTER TABLE engagement_consent_newest ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_consent_record(uuid, boolean, text, timestamptz, text, boolean) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION engagement_consent(uuid, boolean, text, timestamptz, text) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION engagement_opt_out(uuid, text, timestamptz, text, boolean) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_consent_record(uuid, boolean, text, timestamptz, text, boolean) FROM PUBLIC%s', coalesce(', ' || api, ''));
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_consent_newest FROM %s', api);
    END IF;
END
$$;
