-- The applied schema version and whether its migration was interrupted
-- half-way (golang-migrate's table, migrations.Table; version -1 is none).
-- No row, or no table (42P01), is no schema yet.
SELECT version, dirty FROM engagement_schema_migrations LIMIT 1
