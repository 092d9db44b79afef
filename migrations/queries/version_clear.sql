-- Empties golang-migrate's version table (migrations.Table) before
-- version_write.sql writes its one row, in one transaction: a DELETE where
-- golang-migrate's driver runs TRUNCATE (see guardedDriver.SetVersion).
DELETE FROM engagement_schema_migrations
