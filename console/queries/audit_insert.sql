-- One action's audit row, in the action's own transaction; @reason is the
-- operator's, '' for none.
INSERT INTO engagement_console_audit (actor, action, filter, messages, reason)
VALUES (@actor, @action, @filter, @messages, NULLIF(@reason, ''))
RETURNING id;
