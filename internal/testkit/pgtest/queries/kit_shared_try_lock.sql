-- Takes the lock of shared database @datname (of class @class) if it is
-- free: its process has ended.
SELECT pg_try_advisory_lock(@class::int, hashtext(@datname)) AS free
