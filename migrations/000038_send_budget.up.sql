-- The send budget (queue-process --daily-limit, issue 34): at most a
-- number of distinct recipients per transport in any rolling 24 hours,
-- counted here, across every process.
--
-- engagement_send_budgets holds one row per budgeted transport: the limit
-- its processes were last started with (for engagementctl status and the
-- console), the warm-up ramp, and how many slots of the window are spent
-- now (used). Every claim under a budget counts its slots onto the row, if
-- they fit, in the statement that spends them; near the limit, claims lock
-- the row first and take the slots one after another in due order. Two or
-- ten processes together never exceed the limit.
CREATE TABLE engagement_send_budgets (
    transport       text PRIMARY KEY,
    daily_limit     integer     NOT NULL CHECK (daily_limit > 0),
    ramp_start      integer     CHECK (ramp_start > 0),
    ramp_factor     numeric     CHECK (ramp_factor >= 1),
    ramp_started_at timestamptz,
    used            integer     NOT NULL DEFAULT 0 CHECK (used >= 0),
    configured_at   timestamptz NOT NULL DEFAULT now()
);

-- What a transport's window holds, two ways. While it has ample room, a
-- claim spends one slot per recipient it sends to and records them as one
-- row here: a claim's worth of slots, counted once whoever they go to.
CREATE TABLE engagement_send_budget_claims (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    transport  text        NOT NULL,
    spent_at   timestamptz NOT NULL,
    recipients integer     NOT NULL CHECK (recipients >= 0)
);
CREATE INDEX engagement_send_budget_claims_spent_idx
    ON engagement_send_budget_claims (transport, spent_at);

-- Near the limit, each recipient counts once, and a message to a recipient
-- already in the window costs nothing: one row per recipient (a recipient
-- is the address a message goes to, destination_jid, kept as
-- md5(jid)::uuid so the budget stores no JID), stamped with the last claim
-- of a message to them. message_id and previous_spent_at let a message
-- handed back unsent give its slot back.
--
-- Either way a slot counts until 24 hours after the claim that spent it;
-- the claims under the budget's lock drop what is older.
CREATE TABLE engagement_send_budget_recipients (
    transport         text        NOT NULL,
    recipient         uuid        NOT NULL,
    spent_at          timestamptz NOT NULL,
    message_id        uuid,
    previous_spent_at timestamptz,
    PRIMARY KEY (transport, recipient)
);
CREATE INDEX engagement_send_budget_recipients_spent_idx
    ON engagement_send_budget_recipients (transport, spent_at);

-- Why a pending message waits past when it was due: 'quiet_hours' or
-- 'budget' (NULL: it does not, or it waits for a retry). The claim sets
-- it when it defers a message and clears it when it claims one. A
-- nullable column without a default, and a check NOT VALID: no rewrite or
-- scan of the bot's table.
ALTER TABLE engagement_message_queue
    ADD COLUMN IF NOT EXISTS deferred_reason text,
    ADD CONSTRAINT engagement_message_queue_deferred_reason_check
        CHECK (deferred_reason IN ('quiet_hours', 'budget')) NOT VALID;

-- The end of the quiet hours (@quiet_start to @quiet_end after midnight,
-- wrapping midnight when the end is not after the start) that the instant
-- at falls in, on the clocks of time zone tz; NULL when it falls outside
-- them, or when there are none (quiet_start NULL). The claim defers a
-- message due inside them to this instant.
CREATE FUNCTION engagement_quiet_until(at timestamptz, tz text, quiet_start interval, quiet_end interval)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN quiet_start IS NOT NULL AND tz IS NOT NULL
                 AND CASE WHEN quiet_start < quiet_end
                          THEN (at AT TIME ZONE tz)::time >= quiet_start::time AND (at AT TIME ZONE tz)::time < quiet_end::time
                          ELSE (at AT TIME ZONE tz)::time >= quiet_start::time OR (at AT TIME ZONE tz)::time < quiet_end::time END
                THEN (CASE WHEN (at AT TIME ZONE tz)::time < quiet_end::time
                           THEN (at AT TIME ZONE tz)::date + quiet_end
                           ELSE (at AT TIME ZONE tz)::date + 1 + quiet_end END) AT TIME ZONE tz
           END
$$;

-- Raised by a claim's spend of the budget (delivery's budget_spend.sql)
-- when the claim's recipients do not all fit: the statement, stamps and
-- all, is undone, and the claim is applied under the budget's lock
-- instead. SQLSTATE EB001.
CREATE FUNCTION engagement_send_budget_full() RETURNS integer
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'the send budget has no room for the whole claim' USING ERRCODE = 'EB001';
END
$$;

-- Closed to Supabase's Data API as migration 28 closes the rest.
ALTER TABLE engagement_send_budgets ENABLE ROW LEVEL SECURITY;
ALTER TABLE engagement_send_budget_recipients ENABLE ROW LEVEL SECURITY;
ALTER TABLE engagement_send_budget_claims ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_quiet_until(timestamptz, text, interval, interval) FROM PUBLIC%s',
                   coalesce(', ' || api, ''));
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_send_budget_full() FROM PUBLIC%s', coalesce(', ' || api, ''));
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_send_budgets, engagement_send_budget_recipients, '
                       'engagement_send_budget_claims FROM %s', api);
        EXECUTE format('REVOKE ALL ON SEQUENCE engagement_send_budget_claims_id_seq FROM %s', api);
    END IF;
END
$$;
