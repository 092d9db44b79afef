-- The server process a statement runs on (the kit's own tests).
SELECT pg_backend_pid() AS pid
