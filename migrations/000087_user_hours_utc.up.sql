-- The user's hour (issue 61) at (almost) no cost to the bot's call.
-- Migration 85's engagement_fire read the user's profile on every
-- user_message to count the message in the user's zone: a primary-key probe
-- of user_profiles and one of engagement_time_zones, 30 to 40 µs a call,
-- more than issue 61's 10 % (docs/BENCHMARKS.md). From here on the
-- histogram counts by the hour of day in UTC:
--
--   message_hours    element h + 1 is UTC hour h (was: the user's zone's
--                    hour h); the weights, their reference
--                    (message_hours_at), the half-life and the scaling are
--                    migration 85's.
--   message_hour     the UTC hour with the most weight (the earlier UTC
--                    hour on a tie).
--   recent_messages  unchanged.
--
-- The call's extra work is arithmetic on the row it already locks and
-- updates: no other table is read, no second statement (the rare scaling
-- of the weights, 360 days on, is computed in the function too), and the
-- hours are changed in the function's variables, read with the row's lock
-- and written back by its one UPDATE. engagement-daily --best-hour turns the
-- UTC hour into the user's zone when it schedules (it reads the zone
-- anyway, for the quiet hours): the goodbye goes at the first start of an
-- hour of the user's clock within that UTC hour, which for a zone a whole
-- number of hours off UTC is the UTC hour's own start (docs/timing.md says
-- what a UTC count cannot know: summer time's change of offset).
--
-- The histograms migration 85 kept are turned to UTC here, each by its
-- profile's zone's offset now (the zone as migration 85 read it): the
-- local hour L becomes the UTC hour L - ceil(offset) (20:00 in Kolkata,
-- +05:30, becomes 14:00 UTC, whose first local hour start is 20:00 again),
-- and message_hour is the new histogram's largest element. Only rows with
-- a histogram are written.
UPDATE user_engagement_states s
   SET message_hours = r.hours,
       message_hour  = (SELECT u.i - 1 FROM unnest(r.hours) WITH ORDINALITY u(x, i)
                         ORDER BY u.x DESC, u.i LIMIT 1)
  FROM user_engagement_states o
 CROSS JOIN LATERAL (
     SELECT CASE WHEN p.timezone IS NULL THEN 'UTC'
                 WHEN EXISTS (SELECT FROM engagement_time_zones t WHERE t.name = p.timezone) THEN p.timezone
                 ELSE coalesce(engagement_zone(p.timezone), 'UTC') END AS zone
       FROM user_profiles p WHERE p.user_id = o.user_id
     UNION ALL SELECT 'UTC'
     LIMIT 1
 ) z
 CROSS JOIN LATERAL (
     SELECT ceil(extract(epoch FROM (now() AT TIME ZONE z.zone) - (now() AT TIME ZONE 'UTC')) / 3600)::int AS shift
 ) f
 CROSS JOIN LATERAL (
     SELECT ARRAY(SELECT coalesce(o.message_hours[((u + f.shift) % 24 + 24) % 24 + 1], 0)
                    FROM generate_series(0, 23) u ORDER BY u)::real[] AS hours
 ) r
 WHERE o.user_id = s.user_id AND o.message_hours IS NOT NULL AND f.shift % 24 <> 0;

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
    owner uuid;
    -- For user_message (migrations 85, 87): the UTC hour of day the user
    -- wrote, 1 to 24, and the row's hours, read with its lock, changed
    -- here in the function's own variables and written back by the one
    -- UPDATE (a separate expression per column in the UPDATE cost more).
    h     int;
    ref   timestamptz;
    hours real[];
    top   smallint;
    rm    timestamptz[];
BEGIN
    -- An instant the bot cannot have seen: infinities, before 2000, or
    -- more than the clock skew ahead of the database (a JavaScript
    -- timestamp in microseconds is the year 58874). Stored, it would keep
    -- the user from every goodbye, since activity never moves back.
    IF NOT isfinite(at) OR at < timestamptz '2000-01-01 00:00:00+00' OR at > now() + interval '5 minutes' THEN
        RAISE EXCEPTION 'engagement_fire: instant % is out of range (2000-01-01 to 5 minutes past the database clock, %)', at, now()
            USING ERRCODE = 'EN005';
    END IF;
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
            SELECT r.state, r.user_id INTO known, owner FROM engagement_fire_requests r WHERE r.request_key = p_request_key;
            -- A key is one user's: the same key on another user's move is
            -- a bot's mistake, refused, not answered with the first user's
            -- state.
            IF owner IS DISTINCT FROM p_user_id THEN
                RAISE EXCEPTION 'engagement_fire: request key % was used for another user', quote_literal(p_request_key)
                    USING ERRCODE = 'EN006';
            END IF;
            RETURN known;
        END IF;
    END IF;

    -- The user's row, locked: the jobs skip a row the bot holds.
    SELECT s.state, s.message_hours_at, s.message_hours, s.message_hour, s.recent_messages INTO cur, ref, hours, top, rm
      FROM user_engagement_states s WHERE s.user_id = p_user_id FOR NO KEY UPDATE;
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

    IF p_trigger = 'user_message' THEN
        -- The hour of day the user wrote, in UTC: arithmetic on the
        -- instant, no read of the profile (migration 87). The daily job
        -- turns it into the user's zone when it schedules.
        h := (floor(date_part('epoch', at) / 3600)::int8 % 24)::int + 1;
        IF ref IS NULL THEN
            hours := array_fill(0::real, ARRAY[24]);
            ref := at;
        ELSIF at > ref + interval '360 days' THEN
            -- Rare: the histogram scaled to a reference 360 days newer.
            hours := ARRAY(SELECT CASE WHEN x * f < 1e-30 THEN 0 ELSE x * f END
                             FROM unnest(hours) WITH ORDINALITY u(x, i),
                                  power(2::float8, greatest(-60, (date_part('epoch', ref) - date_part('epoch', at)) / 2592000)) f
                            ORDER BY i)::real[];
            ref := at;
        END IF;
        -- The message's weight added to its hour (the array is the
        -- function's own: one element changes in place).
        hours[h] := hours[h] + power(2::float8, greatest(-60, (date_part('epoch', at) - date_part('epoch', ref)) / 2592000));
        -- The hour with the most weight: only this one can overtake it
        -- (the earlier hour on a tie).
        IF top IS NULL OR hours[h] > hours[top + 1] OR (hours[h] = hours[top + 1] AND h - 1 < top) THEN
            top := h - 1;
        END IF;
        -- The message among the newest three, in order.
        IF rm IS NULL OR at >= rm[1] THEN
            rm := (at || rm)[1:3];
        ELSIF rm[2] IS NULL OR at >= rm[2] THEN
            rm := rm[1:1] || at || rm[2:2];
        ELSIF rm[3] IS NULL OR at >= rm[3] THEN
            rm := rm[1:2] || at;
        END IF;
    END IF;

    UPDATE user_engagement_states s
       SET state              = nxt,
           message_hours      = hours,
           message_hours_at   = ref,
           message_hour       = top,
           recent_messages    = rm,
           updated_at         = now(),
           -- Activity never moves back, except from an instant that cannot
           -- be (stored before this check, or by hand): then this one
           -- replaces it.
           last_activity_at   = CASE WHEN s.last_activity_at > now() + interval '5 minutes' OR NOT isfinite(s.last_activity_at)
                                     THEN at ELSE greatest(s.last_activity_at, at) END,
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
