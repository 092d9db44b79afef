-- Dry run of cleanup_delete_audit.sql: how many audit rows it would delete
-- (written before @cutoff).
SELECT count(*) AS audit_rows FROM engagement_console_audit a WHERE a.at < @cutoff
