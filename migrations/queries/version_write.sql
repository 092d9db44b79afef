-- Writes golang-migrate's one version row, after version_clear.sql.
INSERT INTO engagement_schema_migrations (version, dirty) VALUES (@version, @dirty)
