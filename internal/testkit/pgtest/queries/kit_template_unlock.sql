-- Releases the lock of the templates' builders (@key).
SELECT pg_advisory_unlock(@key::bigint) AS released
