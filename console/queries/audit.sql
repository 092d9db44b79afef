-- The console's audit log, newest first.
SELECT id, at, actor, action, filter, messages, coalesce(reason, '') AS reason
  FROM engagement_console_audit
 ORDER BY id DESC
 LIMIT @limit;
