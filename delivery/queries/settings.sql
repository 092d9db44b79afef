-- What queue-process last ran with on each transport (settings_save.sql),
-- by transport name; the durations in seconds.
SELECT s.transport, s.kind_priority, extract(epoch FROM s.kind_priority_max_wait)::float8, s.per_user_cap,
       extract(epoch FROM s.per_user_cap_window)::float8, extract(epoch FROM s.send_interval)::float8,
       extract(epoch FROM s.least_gap)::float8, extract(epoch FROM s.send_jitter)::float8, s.spread_budget,
       extract(epoch FROM s.waking_hours)::float8, s.pace_fits, s.daily_limit, s.daily_limit_auto,
       s.quiet_hours, s.timezone, s.recorded_at
  FROM engagement_queue_settings s
 ORDER BY s.transport;
