-- Takes, for the session, the lock of shared database @datname (of lock
-- class @class): the database is in use while its lock is held.
SELECT pg_advisory_lock(@class::int, hashtext(@datname))
