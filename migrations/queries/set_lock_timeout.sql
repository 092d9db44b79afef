-- Sets the session's lock_timeout to @lock_timeout (milliseconds; '0' is
-- no limit): Config.LockTimeout, on each of the migrator's connections.
SELECT set_config('lock_timeout', @lock_timeout::text, false) AS lock_timeout
