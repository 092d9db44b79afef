-- engagement_fire: the bot's moves of the state machine, one SQL call each.
--
--   SELECT engagement_fire(user_id, trigger[, at][, request_key])  -> the user's state afterwards
--
-- The bot triggers and where they go (statemachine.Transitions; a test
-- fires every state x trigger pair here and there and fails on any
-- difference):
--
--   user_message                 any state    -> active
--   goodbye_answer_help          goodbye_sent -> help_flow
--   goodbye_answer_remind_later  goodbye_sent -> remind_later (remind_at = at + 14 days)
--   goodbye_answer_dormant       goodbye_sent -> dormant
--
-- at is the move's instant (NULL: the transaction's, now()). Every move is
-- the user writing, so each records the activity (last_activity_at = at,
-- never moved back): a user who answers the goodbye is not silent, and
-- gets no second goodbye. A move out of goodbye_sent marks the goodbye
-- over (goodbye_expires_at = at, when earlier). The move and its row in engagement_state_transitions are
-- written together; user_message from active, which the bot fires on
-- every message, records the activity and logs nothing.
--
-- Refused, with nothing changed (docs/bot.md lists them):
--   EN001  an unknown trigger
--   EN002  a trigger of the scheduler's jobs (inactivity_14d, …), not the bot's
--   EN003  no such user (no user_engagement_states row)
--   EN004  the trigger is not a move from the user's current state (DETAIL: that state)
--
-- request_key (optional): a retried webhook, a message the bot handles
-- twice. The first call with a key moves the user and records the key
-- with the state it left; every later call with it changes nothing and
-- returns that state. Concurrent calls with one key: the second waits on
-- the key's unique index for the first, then returns its state.
-- engagementctl cleanup ages the keys out with the messages.
--
-- It works through a transaction pooler (no session state) and runs as its
-- owner (SECURITY DEFINER, search_path pinned): the bot's role needs
-- EXECUTE on it and nothing else (deploy/sql/roles.sql, engagement_bot).
-- Nobody else may execute it: not PUBLIC, not Supabase's anon or
-- authenticated.

CREATE TABLE engagement_fire_requests (
    request_key text        PRIMARY KEY,
    user_id     uuid        NOT NULL,
    trigger     text        NOT NULL,
    state       text,       -- the state the call left (NULL only inside it)
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX engagement_fire_requests_created_at_idx ON engagement_fire_requests (created_at);

CREATE FUNCTION engagement_fire(p_user_id uuid, p_trigger text, p_at timestamptz DEFAULT NULL,
                                p_request_key text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    at    timestamptz := coalesce(p_at, now());
    cur   text;
    nxt   text;
    known text;
BEGIN
    IF p_trigger IS NULL
       OR p_trigger NOT IN ('user_message', 'goodbye_answer_help', 'goodbye_answer_remind_later', 'goodbye_answer_dormant') THEN
        IF p_trigger IN ('inactivity_14d', 'goodbye_timeout', 'goodbye_undelivered', 'reminder_due') THEN
            RAISE EXCEPTION 'engagement_fire: % is a trigger of the scheduler''s jobs, not a move the bot makes', p_trigger
                USING ERRCODE = 'EN002';
        END IF;
        RAISE EXCEPTION 'engagement_fire: unknown trigger %', coalesce(quote_literal(p_trigger), 'NULL')
            USING ERRCODE = 'EN001';
    END IF;

    IF p_request_key IS NOT NULL THEN
        -- Taken first: a concurrent call with the key waits here for this
        -- one's transaction, then finds its state.
        INSERT INTO engagement_fire_requests (request_key, user_id, trigger)
        VALUES (p_request_key, p_user_id, p_trigger)
        ON CONFLICT (request_key) DO NOTHING;
        IF NOT FOUND THEN
            SELECT r.state INTO known FROM engagement_fire_requests r WHERE r.request_key = p_request_key;
            RETURN known;
        END IF;
    END IF;

    -- The user's row, locked: the jobs skip a row the bot holds.
    SELECT s.state INTO cur FROM user_engagement_states s WHERE s.user_id = p_user_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'engagement_fire: no user %', p_user_id USING ERRCODE = 'EN003';
    END IF;
    nxt := CASE
        WHEN p_trigger = 'user_message' THEN 'active'
        WHEN cur = 'goodbye_sent' AND p_trigger = 'goodbye_answer_help' THEN 'help_flow'
        WHEN cur = 'goodbye_sent' AND p_trigger = 'goodbye_answer_remind_later' THEN 'remind_later'
        WHEN cur = 'goodbye_sent' AND p_trigger = 'goodbye_answer_dormant' THEN 'dormant'
    END;
    IF nxt IS NULL THEN
        RAISE EXCEPTION 'engagement_fire: % is not a move from state %', p_trigger, cur
            USING ERRCODE = 'EN004', DETAIL = cur; -- the state, for clients to read
    END IF;

    UPDATE user_engagement_states s
       SET state              = nxt,
           updated_at         = now(),
           last_activity_at   = greatest(s.last_activity_at, at),
           remind_at          = CASE WHEN p_trigger = 'goodbye_answer_remind_later' THEN at + interval '14 days'
                                     ELSE s.remind_at END,
           goodbye_expires_at = CASE WHEN cur = 'goodbye_sent' AND nxt <> 'goodbye_sent'
                                     THEN least(coalesce(s.goodbye_expires_at, at), at)
                                     ELSE s.goodbye_expires_at END
     WHERE s.user_id = p_user_id;
    IF nxt <> cur THEN
        INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger)
        VALUES (p_user_id, cur, nxt, p_trigger);
    END IF;
    IF p_request_key IS NOT NULL THEN
        UPDATE engagement_fire_requests SET state = nxt WHERE request_key = p_request_key;
    END IF;
    RETURN nxt;
END
$$;

-- Its own schema only, whatever the caller's search_path.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_fire(uuid, text, timestamptz, text) SET search_path = %I, pg_temp',
                   current_schema());
END
$$;

-- Closed to Supabase's Data API as migration 28 closes the rest.
ALTER TABLE engagement_fire_requests ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_fire(uuid, text, timestamptz, text) FROM PUBLIC%s', coalesce(', ' || api, ''));
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_fire_requests FROM %s', api);
    END IF;
END
$$;
