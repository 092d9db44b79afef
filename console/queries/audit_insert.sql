-- One action's audit row, in the action's own transaction.
INSERT INTO engagement_console_audit (actor, action, filter, messages)
VALUES (@actor, @action, @filter, @messages)
RETURNING id;
