-- Every door (issue 56; ../shared/CONTRACT.md, round seven): one rule for
-- "may this message go to this user now", whoever queued the message (a
-- job, engagementctl enqueue, POST /api/messages, the console, the bot's
-- own SQL), applied when it is queued (sender's enqueue.sql), when it is
-- claimed (claim.sql) and right before its request (recheck.sql):
--
--   erased     the user was erased (engagementctl erase, the console) and
--              has not opted back in since                → nothing at all
--   opted_out  a marketing message to a user opted out of
--              re-engagement                              → refused
--   holdout    a goodbye to a user held out of the current
--              cycle (the daily job's holdout)            → refused
--
-- engagement_refusal() is that rule, on values each statement reads its
-- own way (a probe per message in a claim of 400): the one place it is
-- written. Categories, erasures and the holdout flag are the tables and
-- columns below.

-- Two more reasons a message is cancelled: 'erased' and 'holdout' (the
-- rule above; 'opted_out' was one already). NOT VALID, as before: only new
-- rows are checked.
ALTER TABLE engagement_message_queue
    DROP CONSTRAINT IF EXISTS engagement_message_queue_cancel_reason_check,
    ADD CONSTRAINT engagement_message_queue_cancel_reason_check
        CHECK (cancel_reason IN ('opted_out', 'stale', 'no_user', 'operator', 'frequency', 'erased', 'holdout')) NOT VALID;

-- A message type's Meta category, as the operator declares it
-- (engagementctl categories set TYPE CATEGORY). The shipped kinds'
-- categories are statemachine's and cannot be declared here; any other type
-- not listed is marketing: what Meta bills a template that is not clearly
-- utility or authentication, and the category the opt-out stops.
CREATE TABLE engagement_message_types (
    message_type text        PRIMARY KEY CHECK (length(message_type) BETWEEN 1 AND 64),
    category     text        NOT NULL CHECK (category IN ('marketing', 'utility', 'authentication', 'service')),
    declared_at  timestamptz NOT NULL DEFAULT now(),
    declared_by  text        CHECK (length(declared_by) <= 200)
);

-- Who was erased, and when: erase (package erase) adds the row in its
-- transaction, next to the opt-out it records. Only the user id (a UUID,
-- not the WhatsApp id) is kept: it is what keeps every door shut to them.
-- An opt-in the user makes afterwards (they wrote again and asked) opens
-- the doors again: erased means a row here while the user is opted out or
-- has no profile.
CREATE TABLE engagement_erasures (
    user_id   uuid        PRIMARY KEY,
    erased_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE engagement_message_types ENABLE ROW LEVEL SECURITY;
ALTER TABLE engagement_erasures ENABLE ROW LEVEL SECURITY;

-- Whether the user's current goodbye cycle is held out: set by the daily
-- job's inactivity_14d move (true for a user the holdout took, false for
-- the others), read by every door for a goodbye. The cycle lasts until the
-- user writes again (last_activity_at past goodbye_sent_at). The
-- scheduler's column on the bot's table, nullable without a default: the
-- table is not rewritten.
ALTER TABLE user_engagement_states ADD COLUMN goodbye_holdout boolean;

-- Users in a held-out cycle now: the newest goodbye move of each user
-- still waiting on a goodbye was logged holdout.
UPDATE user_engagement_states s
   SET goodbye_holdout = true
 WHERE s.goodbye_sent_at IS NOT NULL
   AND coalesce(s.last_activity_at, s.created_at) <= s.goodbye_sent_at
   AND (SELECT t.holdout FROM engagement_state_transitions t
         WHERE t.user_id = s.user_id AND t.trigger = 'inactivity_14d'
         ORDER BY t.id DESC LIMIT 1);

-- The rule. category is the message type's (statemachine's for a shipped
-- kind, else engagement_message_types', else 'marketing'); erased whether
-- the user has an erasure and is not opted back in; opted_out the profile's
-- flag; held_out whether the message is a goodbye and its user's current
-- cycle is held out. NULL: the message may go, as far as consent goes (the
-- kinds' own rules, send_while and the like, are the claim's).
CREATE FUNCTION engagement_refusal(category text, erased boolean, opted_out boolean, held_out boolean)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN erased THEN 'erased'
                WHEN opted_out AND coalesce(category, 'marketing') = 'marketing' THEN 'opted_out'
                WHEN held_out THEN 'holdout'
           END
$$;

-- An opt-out's confirmation is queued by engagement_opt_out(...,
-- p_confirm => true) alone: a row of that type that is to be sent (pending
-- or processing, inserted so or moved there by a requeue) must answer an
-- opt-out the consent log holds (its period_start is the opt-out's
-- instant, as engagement_opt_out writes it) and carry the confirmation's
-- text. Any other (engagementctl enqueue, the API, the bot's SQL) is
-- refused here, SQLSTATE EN010, whatever door it came through. A row
-- written as history (sent, failed, cancelled) is not a send and passes.
CREATE FUNCTION engagement_confirmation_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path TO 'public', 'pg_temp'
AS $$
BEGIN
    IF NEW.message_key IS DISTINCT FROM 'engagement.opt_out.confirmation'
       OR NEW.period_start IS NULL
       OR NOT EXISTS (SELECT FROM engagement_consent_events e
                       WHERE e.user_id = NEW.user_id AND e.opted_out AND NOT e.superseded
                         AND e.at = NEW.period_start) THEN
        RAISE EXCEPTION 'an opt-out''s confirmation is queued only by engagement_opt_out(..., p_confirm => true)'
            USING ERRCODE = 'EN010';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER engagement_confirmation_guard
    BEFORE INSERT OR UPDATE OF message_type, message_key, period_start, status ON engagement_message_queue
    FOR EACH ROW WHEN (NEW.message_type = 'opt_out_confirmation' AND NEW.status IN ('pending', 'processing'))
    EXECUTE FUNCTION engagement_confirmation_guard();

DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_refusal(text, boolean, boolean, boolean), '
                   'engagement_confirmation_guard() FROM PUBLIC%s', coalesce(', ' || api, ''));
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_message_types, engagement_erasures FROM %s', api);
    END IF;
END
$$;
