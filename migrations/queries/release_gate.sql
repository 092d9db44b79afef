-- Gives the migration gate (try_gate.sql) back.
-- not null: released
SELECT pg_advisory_unlock(hashtextextended('engagement_schema_migrations gate: ' || current_schema(), 0)) AS released
