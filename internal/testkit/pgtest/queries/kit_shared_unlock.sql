-- Releases the lock of shared database @datname (of class @class).
SELECT pg_advisory_unlock(@class::int, hashtext(@datname)) AS released
