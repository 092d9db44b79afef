-- Account-wide refusals of a transport (issue 58; ../shared/CONTRACT.md,
-- round seven, "An unofficial number's limits"): the bot answered that
-- WhatsApp refuses its whole account (reachout_timelock, rate_overlimit,
-- logged_out, banned). Every queue-process of the transport sends nothing
-- while a row here is active: not cleared, and its paused_until (NULL: no
-- end of its own, for logged_out and banned) not reached at the
-- processor's clock. A row per transport: a later refusal re-arms it; an
-- operator clears it (engagementctl pause clear, the console), which keeps
-- the row as the last pause's record.
CREATE TABLE engagement_transport_pauses (
    transport    text        PRIMARY KEY,
    kind         text        NOT NULL
                 CHECK (kind IN ('reachout_timelock', 'rate_overlimit', 'logged_out', 'banned')),
    status_code  integer     NOT NULL,
    paused_at    timestamptz NOT NULL,
    paused_until timestamptz,
    paused_by    text        NOT NULL,
    refusals     integer     NOT NULL DEFAULT 1,
    cleared_at   timestamptz,
    cleared_by   text,
    CHECK (paused_until IS NULL OR paused_until >= paused_at)
);

-- Closed to Supabase's Data API as migration 28 closes the rest.
ALTER TABLE engagement_transport_pauses ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_transport_pauses FROM %s', api);
    END IF;
END
$$;
