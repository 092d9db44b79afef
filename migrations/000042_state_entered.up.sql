-- When a user entered their state, as business time: the clock a timer
-- counting from "the state's entry" reads (statemachine.StateEntered).
--
-- A transition's clock is part of the state machine's table (issue 35):
-- the daily job's timers and verify's no_user_stuck read each timer's clock
-- and wait from the table, and the clocks that are times on the user's row
-- are read here, by name, in one place (engagement_clock). The state's
-- entry was the one such time nothing recorded: state_changed_at
-- (migration 15) is the physical time of the write, never business time.
--
-- state_entered_at is set by every move:
--   the jobs' moves         the run's as-of (a re-run a day late with
--                           --as-of enters the state on the day it should
--                           have);
--   engagement_fire         its p_at (now() when omitted);
--   any other state change  now(), by the trigger that stamps
--                           state_changed_at (a bot that writes the state
--                           itself), unless the write set it;
--   a new row               now(), its default.
-- Rows older than this migration keep NULL: their entry is read as
-- state_changed_xact_at, else created_at. The column is added without a
-- default first, so the bot's table is not rewritten.
ALTER TABLE user_engagement_states ADD COLUMN state_entered_at timestamptz;
ALTER TABLE user_engagement_states ALTER COLUMN state_entered_at SET DEFAULT now();

CREATE OR REPLACE FUNCTION engagement_stamp_state_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.state_changed_at := clock_timestamp();
    NEW.state_changed_xact_at := now();
    IF NEW.state_entered_at IS NOT DISTINCT FROM OLD.state_entered_at THEN
        NEW.state_entered_at := now();
    END IF;
    RETURN NEW;
END
$$;

-- The time clock names on a user's engagement row (see statemachine.Clock):
--   'last_activity'  last_activity_at, or created_at when the bot recorded
--                    no activity;
--   'remind_at'      remind_at;
--   'state_entered'  state_entered_at (state_changed_xact_at, else
--                    created_at, for a row older than this migration).
-- NULL for any other name: a timer on an unknown clock is never due.
-- Plain SQL, inlined into the statements that call it, as migration 29's
-- deadlines.
CREATE FUNCTION engagement_clock(clock text, last_activity_at timestamptz, created_at timestamptz,
                                 remind_at timestamptz, state_entered_at timestamptz,
                                 state_changed_xact_at timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE clock
        WHEN 'last_activity' THEN coalesce(last_activity_at, created_at)
        WHEN 'remind_at'     THEN remind_at
        WHEN 'state_entered' THEN coalesce(state_entered_at, state_changed_xact_at, created_at)
    END
$$;

-- The timers count from their clocks now; reminder_due's own deadline
-- (remind_at <= as_of) is engagement_clock('remind_at', ...) + 0.
DROP FUNCTION engagement_reminder_due(timestamptz, timestamptz);

-- The bot's moves record the state's entry at the move's time.
CREATE OR REPLACE FUNCTION engagement_fire(p_user_id uuid, p_trigger text, p_at timestamptz DEFAULT NULL,
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
           state_entered_at   = CASE WHEN nxt <> cur THEN at ELSE s.state_entered_at END,
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

-- Its own schema only, whatever the caller's search_path (CREATE OR
-- REPLACE resets it).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_fire(uuid, text, timestamptz, text) SET search_path = %I, pg_temp',
                   current_schema());
END
$$;


DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_clock(text, timestamptz, timestamptz, timestamptz, '
                   'timestamptz, timestamptz) FROM PUBLIC%s', coalesce(', ' || api, ''));
END
$$;
