-- Takes the migration gate if it is free, without waiting: a session
-- advisory lock per database and schema (advisory locks are per database
-- already). Its key differs from golang-migrate's own lock, which the
-- gate's holder takes next. release_gate.sql gives it back.
-- not null: taken
SELECT pg_try_advisory_lock(hashtextextended('engagement_schema_migrations gate: ' || current_schema(), 0)) AS taken
