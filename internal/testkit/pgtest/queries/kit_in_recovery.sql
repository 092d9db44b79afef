-- Whether the server is a standby (in recovery).
SELECT pg_is_in_recovery() AS in_recovery
