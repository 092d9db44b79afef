-- The server's version as a number (150004 for 15.4): CREATE DATABASE's
-- STRATEGY clause is PostgreSQL 15's.
SELECT current_setting('server_version_num')::int AS version
