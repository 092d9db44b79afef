-- Back to migration 85's engagement_fire, which counts each message in
-- the user's zone (reading their profile), and the histograms turned back
-- from UTC to each profile's zone by its offset now: the UTC hour U becomes
-- the local hour U + ceil(offset), the inverse of the up migration's turn.
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
     SELECT ARRAY(SELECT coalesce(o.message_hours[((l - f.shift) % 24 + 24) % 24 + 1], 0)
                    FROM generate_series(0, 23) l ORDER BY l)::real[] AS hours
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
    -- For user_message (migration 85): the hour of day the user wrote in
    -- their zone, 1 to 24, and the weight of the message.
    h     int;
    w     float8;
    ref   timestamptz;
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
    SELECT s.state, s.message_hours_at INTO cur, ref
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
        -- The hour of day the user wrote, in their zone: a name
        -- engagement_time_zones holds as it is (one probe), else what
        -- engagement_zone() makes of it (the claim's rule), else UTC.
        SELECT extract(hour FROM at AT TIME ZONE
                   CASE WHEN p.timezone IS NULL THEN 'UTC'
                        WHEN EXISTS (SELECT FROM engagement_time_zones t WHERE t.name = p.timezone) THEN p.timezone
                        ELSE coalesce(engagement_zone(p.timezone), 'UTC') END)::int + 1
          INTO h FROM user_profiles p WHERE p.user_id = p_user_id;
        h := coalesce(h, extract(hour FROM at AT TIME ZONE 'UTC')::int + 1);
        IF at > ref + interval '360 days' THEN
            -- Rare: the histogram scaled to a reference 360 days newer.
            UPDATE user_engagement_states s
               SET message_hours = ARRAY(SELECT CASE WHEN x * f < 1e-30 THEN 0 ELSE x * f END
                                           FROM unnest(s.message_hours) WITH ORDINALITY u(x, i),
                                                power(2::float8, greatest(-60, extract(epoch FROM ref - at) / 2592000)) f
                                          ORDER BY i)::real[],
                   message_hours_at = at
             WHERE s.user_id = p_user_id;
            ref := at;
        END IF;
        w := power(2::float8, greatest(-60, extract(epoch FROM at - coalesce(ref, at)) / 2592000));
    END IF;

    UPDATE user_engagement_states s
       SET state              = nxt,
           -- The message's weight added to its hour; the hour with the
           -- most weight (only this one can overtake it); the message among
           -- the newest three (in order, the usual case, without a sort).
           message_hours      = CASE WHEN h IS NULL THEN s.message_hours
                                     ELSE (coalesce(s.message_hours, array_fill(0::real, ARRAY[24])))[1:h - 1]
                                          || (coalesce(s.message_hours[h], 0) + w)::real
                                          || (coalesce(s.message_hours, array_fill(0::real, ARRAY[24])))[h + 1:24] END,
           message_hours_at   = coalesce(s.message_hours_at, at),
           message_hour       = CASE WHEN h IS NULL THEN s.message_hour
                                     WHEN s.message_hour IS NULL
                                       OR coalesce(s.message_hours[h], 0) + w > s.message_hours[s.message_hour + 1]
                                       OR (coalesce(s.message_hours[h], 0) + w = s.message_hours[s.message_hour + 1]
                                           AND h - 1 < s.message_hour)
                                     THEN h - 1 ELSE s.message_hour END,
           recent_messages    = CASE WHEN h IS NULL THEN s.recent_messages
                                     WHEN s.recent_messages IS NULL OR at >= s.recent_messages[1]
                                     THEN (at || s.recent_messages)[1:3]
                                     ELSE ARRAY(SELECT x FROM unnest(s.recent_messages || at) x ORDER BY x DESC LIMIT 3) END,
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
