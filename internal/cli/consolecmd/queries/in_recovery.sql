-- Whether the --replica-url server is a standby (in recovery): the
-- console says in its log when it is a primary instead.
SELECT pg_is_in_recovery() AS standby
