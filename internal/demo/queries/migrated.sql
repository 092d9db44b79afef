-- Whether the database holds the scheduler's schema (its latest tables
-- among them): the demo reuses such a database, and makes one otherwise.
-- It runs on any database, migrated or not.
SELECT to_regclass('engagement_console_audit') IS NOT NULL AS migrated
