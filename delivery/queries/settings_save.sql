-- Record what a queue-process run on @transport runs with
-- (engagement_queue_settings, delivery/settings.go): the order, the
-- per-user cap, the pace as the run worked it out and the send budget's
-- limit, at the processor's clock. The console's queue page and
-- engagementctl status read it.
--
-- nullable: @pace_fits, @quiet_hours, @timezone
INSERT INTO engagement_queue_settings AS s (transport, kind_priority, kind_priority_max_wait, per_user_cap,
       per_user_cap_window, send_interval, least_gap, send_jitter, spread_budget, waking_hours, pace_fits,
       daily_limit, daily_limit_auto, quiet_hours, timezone, recorded_at)
VALUES (@transport::text, @kind_priority::text[], @kind_priority_max_wait::interval, @per_user_cap::integer,
        @per_user_cap_window::interval, @send_interval::interval, @least_gap::interval, @send_jitter::interval,
        @spread_budget::boolean, @waking_hours::interval, @pace_fits::boolean, @daily_limit::integer,
        @daily_limit_auto::boolean, @quiet_hours::text, @timezone::text, now() + @clock_offset::interval)
    ON CONFLICT (transport) DO UPDATE
   SET kind_priority          = EXCLUDED.kind_priority,
       kind_priority_max_wait = EXCLUDED.kind_priority_max_wait,
       per_user_cap           = EXCLUDED.per_user_cap,
       per_user_cap_window    = EXCLUDED.per_user_cap_window,
       send_interval          = EXCLUDED.send_interval,
       least_gap              = EXCLUDED.least_gap,
       send_jitter            = EXCLUDED.send_jitter,
       spread_budget          = EXCLUDED.spread_budget,
       waking_hours           = EXCLUDED.waking_hours,
       pace_fits              = EXCLUDED.pace_fits,
       daily_limit            = EXCLUDED.daily_limit,
       daily_limit_auto       = EXCLUDED.daily_limit_auto,
       quiet_hours            = EXCLUDED.quiet_hours,
       timezone               = EXCLUDED.timezone,
       recorded_at            = EXCLUDED.recorded_at;
