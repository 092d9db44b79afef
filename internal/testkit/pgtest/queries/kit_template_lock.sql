-- Takes the lock of the templates' builders (@key) for the session: one
-- process builds a template at a time.
SELECT pg_advisory_lock(@key::bigint)
