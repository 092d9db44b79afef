-- The databases whose name is LIKE @pattern.
SELECT datname::text AS datname FROM pg_database WHERE datname LIKE @pattern
