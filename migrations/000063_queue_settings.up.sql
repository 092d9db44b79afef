-- What queue-process last ran with, per transport (issue 46, "seen at a
-- glance"): the order (--kind-priority), the per-user cap, the pace
-- (--send-interval, --send-jitter, --spread-budget and the least gap it
-- worked out) and the send budget's limit. Every run writes its
-- transport's row when its workers are done (delivery/settings.go); the console's
-- queue page and engagementctl status read it, since neither has the
-- flags. Processes on one transport with different flags: the last to
-- finish wins, and recorded_at says when that was.
CREATE TABLE engagement_queue_settings (
    transport              text        PRIMARY KEY,
    kind_priority          text[]      NOT NULL DEFAULT '{}',
    kind_priority_max_wait interval    NOT NULL DEFAULT '0',
    per_user_cap           integer     NOT NULL DEFAULT 0,
    per_user_cap_window    interval    NOT NULL DEFAULT '0',
    send_interval          interval    NOT NULL DEFAULT '0',
    least_gap              interval    NOT NULL DEFAULT '0',
    send_jitter            interval    NOT NULL DEFAULT '0',
    spread_budget          boolean     NOT NULL DEFAULT false,
    waking_hours           interval    NOT NULL DEFAULT '24 hours',
    pace_fits              boolean,
    daily_limit            integer     NOT NULL DEFAULT 0,
    daily_limit_auto       boolean     NOT NULL DEFAULT false,
    quiet_hours            text,
    timezone               text,
    recorded_at            timestamptz NOT NULL DEFAULT now()
);

-- Closed to Supabase's Data API as migration 28 closes the rest.
ALTER TABLE engagement_queue_settings ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_queue_settings FROM %s', api);
    END IF;
END
$$;
