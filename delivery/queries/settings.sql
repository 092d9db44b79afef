-- What queue-process last ran with on each transport (settings_save.sql),
-- by transport name; the durations in seconds.
SELECT s.transport, s.kind_priority,
       extract(epoch FROM s.kind_priority_max_wait)::float8 AS kind_priority_max_wait_seconds, s.per_user_cap,
       extract(epoch FROM s.per_user_cap_window)::float8 AS per_user_cap_window_seconds,
       extract(epoch FROM s.send_interval)::float8 AS send_interval_seconds,
       extract(epoch FROM s.least_gap)::float8 AS least_gap_seconds,
       extract(epoch FROM s.send_jitter)::float8 AS send_jitter_seconds, s.spread_budget,
       extract(epoch FROM s.waking_hours)::float8 AS waking_seconds, s.pace_fits, s.daily_limit, s.daily_limit_auto,
       s.quiet_hours, s.timezone, s.recorded_at
  FROM engagement_queue_settings s
 ORDER BY s.transport;
