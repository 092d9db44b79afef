-- Deletes up to @n rows of the console's audit log
-- (engagement_console_audit) written before @cutoff (cleanup
-- --audit-older-than), and returns how many. Nothing names an audit row
-- (the API's answer carries its id, once), so none is kept for another's
-- sake; the horizon is long (an audit trail: default 5 years, at least 1).
WITH doomed AS (
    SELECT a.id FROM engagement_console_audit a
     WHERE a.at < @cutoff
     LIMIT @n
)
DELETE FROM engagement_console_audit a USING doomed WHERE a.id = doomed.id
